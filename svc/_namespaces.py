"""Endpoint namespaces of the sync client (``client.sellers.me()``...).

Each method is one line: build the spec with ``_endpoints`` and send it through the
client, so the async twin in ``_async_namespaces`` stays the same API by construction.
Adding a namespace: a class here, its twin there, one attribute in each client.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from . import _endpoints as ep
from ._endpoints import Amount, Metadata, ResourceKind
from ._models import (
    Balance,
    OwnerCreated,
    Resource,
    ResourceList,
    Seller,
    SellerCreated,
    SellerList,
)
from ._options import RequestOptions
from ._spec import RequestSpec

__all__ = ["Owners", "Requester", "Resources", "Sellers"]

T = TypeVar("T")


class Requester(Protocol):
    """What a namespace needs from its client: send a spec, get the model."""

    def _request(self, spec: RequestSpec[T], options: RequestOptions | None = None) -> T: ...


class _Namespace:
    def __init__(self, client: Requester) -> None:
        self._client = client


class Owners(_Namespace):
    """Owner sign-up (``POST /owners``), where the server has it enabled."""

    def create(self, email: str, *, options: RequestOptions | None = None) -> OwnerCreated:
        """Create an owner; the returned ``owner_jwt`` authorizes the owner routes."""
        return self._client._request(ep.owners_create(email), options)


class Sellers(_Namespace):
    """Seller accounts: owner routes (create, list) and seller-key routes (``/sellers/me``)."""

    def create(
        self, name: str | None = None, *, options: RequestOptions | None = None
    ) -> SellerCreated:
        """Create a seller (owner JWT).  Keep ``seller_key``: it is never shown again."""
        return self._client._request(ep.sellers_create(name), options)

    def list(self, *, options: RequestOptions | None = None) -> SellerList:
        """The owner's sellers (owner JWT)."""
        return self._client._request(ep.sellers_list(), options)

    def me(self, *, options: RequestOptions | None = None) -> Seller:
        """The seller the seller key belongs to."""
        return self._client._request(ep.sellers_me(), options)

    def enable_payments(
        self,
        *,
        processor_profile_id: str | None = None,
        payout_wallet_address: str | None = None,
        options: RequestOptions | None = None,
    ) -> Seller:
        """Turn on MPP and x402 for the seller's gates; check ``mpp_enabled`` on the result.

        With ``payout_wallet_address`` (EVM) open-rail USDC goes straight to that wallet
        and the seller balance is not credited.
        """
        spec = ep.sellers_enable_payments(processor_profile_id, payout_wallet_address)
        return self._client._request(spec, options)

    def balance(self, *, options: RequestOptions | None = None) -> Balance:
        """Balance and the payout readiness flags to check before a withdraw."""
        return self._client._request(ep.sellers_balance(), options)


class Resources(_Namespace):
    """Priced resources (SKUs) of the seller the seller key belongs to."""

    def create(
        self,
        *,
        kind: ResourceKind,
        amount: Amount,
        path: str | None = None,
        tool: str | None = None,
        description: str | None = None,
        metadata: Metadata | None = None,
        upstream_url: str | None = None,
        listed: bool | None = None,
        options: RequestOptions | None = None,
    ) -> Resource:
        """Create an HTTP (``path``) or MCP (``tool``) SKU; agents pay its ``gate_url``.

        ``amount`` is validated locally (no floats, at most 6 decimal places).
        """
        spec = ep.resources_create(
            kind=kind,
            amount=amount,
            path=path,
            tool=tool,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
        )
        return self._client._request(spec, options)

    def list(self, *, options: RequestOptions | None = None) -> ResourceList:
        return self._client._request(ep.resources_list(), options)

    def get(self, resource_id: str, *, options: RequestOptions | None = None) -> Resource:
        return self._client._request(ep.resources_get(resource_id), options)

    def update(
        self,
        resource_id: str,
        *,
        path: str | None = None,
        tool: str | None = None,
        amount: Amount | None = None,
        description: str | None = None,
        metadata: Metadata | None = None,
        upstream_url: str | None = None,
        listed: bool | None = None,
        active: bool | None = None,
        options: RequestOptions | None = None,
    ) -> Resource:
        """Change the fields given; ``None`` leaves a field as it is."""
        spec = ep.resources_update(
            resource_id,
            path=path,
            tool=tool,
            amount=amount,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
            active=active,
        )
        return self._client._request(spec, options)

    def deactivate(self, resource_id: str, *, options: RequestOptions | None = None) -> Resource:
        """Stop selling the resource (``active`` becomes false); its gate stops unlocking."""
        return self._client._request(ep.resources_deactivate(resource_id), options)

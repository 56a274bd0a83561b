"""Every endpoint the SDK calls, written once as a :class:`~svc._spec.RequestSpec`.

The namespace classes of the sync and async clients only call these functions and send
the result, so the route, credential, body and response model of an endpoint live in
exactly one place.  Arguments are checked here, before anything is sent: a float price or
seven decimal places fail locally with ``ValueError`` instead of reaching the service.

To add an endpoint: write a function here, then a one-line method in the sync and async
namespace (``_namespaces`` / ``_async_namespaces``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from ._converter import unstructure
from ._models import (
    Balance,
    Capabilities,
    Health,
    OwnerCreated,
    Resource,
    ResourceList,
    ResourceMetadata,
    Seller,
    SellerCreated,
    SellerList,
)
from ._money import format_amount, parse_amount
from ._spec import RequestSpec, as_json_object, as_model, as_text

__all__ = [
    "DISCOVERY_DOCUMENTS",
    "Amount",
    "DiscoveryDocument",
    "JSONDocument",
    "Metadata",
    "ResourceKind",
    "TextDocument",
    "capabilities",
    "discovery",
    "health",
    "owners_create",
    "ready",
    "resources_create",
    "resources_deactivate",
    "resources_get",
    "resources_list",
    "resources_update",
    "sellers_balance",
    "sellers_create",
    "sellers_enable_payments",
    "sellers_list",
    "sellers_me",
]

#: A price: ``Decimal("0.05")``, ``"0.05"`` or a whole number of dollars.  Never a float.
Amount = Decimal | str | int
#: Resource metadata as a plain dict or the typed model.
Metadata = Mapping[str, Any] | ResourceMetadata
ResourceKind = Literal["http", "mcp"]
TextDocument = Literal["llms.txt", "llms-full.txt"]
JSONDocument = Literal[".well-known/agent.json", "agent-openapi.json"]
DiscoveryDocument = TextDocument | JSONDocument
DISCOVERY_DOCUMENTS: tuple[str, ...] = (
    "llms.txt",
    "llms-full.txt",
    ".well-known/agent.json",
    "agent-openapi.json",
)


def _amount(value: Amount) -> str:
    """Validate locally and send the canonical decimal string."""
    return format_amount(parse_amount(value))


def _metadata(value: Metadata) -> dict[str, Any]:
    if isinstance(value, ResourceMetadata):
        # The typed model writes unset optional keys as null; leave them out instead.
        flat: dict[str, Any] = unstructure(value)
        return {k: v for k, v in flat.items() if v is not None}
    return dict(value)


# --- owners ---------------------------------------------------------------------------------


def owners_create(email: str) -> RequestSpec[OwnerCreated]:
    return RequestSpec(
        method="POST", path="/owners", json={"email": email}, parse=as_model(OwnerCreated)
    )


# --- sellers --------------------------------------------------------------------------------


def sellers_create(name: str | None = None) -> RequestSpec[SellerCreated]:
    return RequestSpec(
        method="POST",
        path="/sellers",
        role="owner",
        json={"name": name},
        parse=as_model(SellerCreated),
    )


def sellers_list() -> RequestSpec[SellerList]:
    return RequestSpec(method="GET", path="/sellers", role="owner", parse=as_model(SellerList))


def sellers_me() -> RequestSpec[Seller]:
    return RequestSpec(method="GET", path="/sellers/me", role="seller", parse=as_model(Seller))


def sellers_enable_payments(
    processor_profile_id: str | None = None, payout_wallet_address: str | None = None
) -> RequestSpec[Seller]:
    return RequestSpec(
        method="PATCH",
        path="/sellers/me/payments",
        role="seller",
        json={
            "processor_profile_id": processor_profile_id,
            "payout_wallet_address": payout_wallet_address,
        },
        parse=as_model(Seller),
    )


def sellers_balance() -> RequestSpec[Balance]:
    return RequestSpec(
        method="GET", path="/sellers/me/balance", role="seller", parse=as_model(Balance)
    )


# --- priced resources -----------------------------------------------------------------------


def resources_create(
    *,
    kind: ResourceKind,
    amount: Amount,
    path: str | None = None,
    tool: str | None = None,
    description: str | None = None,
    metadata: Metadata | None = None,
    upstream_url: str | None = None,
    listed: bool | None = None,
) -> RequestSpec[Resource]:
    return RequestSpec(
        method="POST",
        path="/resources",
        role="seller",
        json={
            "kind": kind,
            "path": path,
            "tool": tool,
            "amount": _amount(amount),
            "description": description,
            "metadata": None if metadata is None else _metadata(metadata),
            "upstream_url": upstream_url,
            "listed": listed,
        },
        parse=as_model(Resource),
    )


def resources_list() -> RequestSpec[ResourceList]:
    return RequestSpec(method="GET", path="/resources", role="seller", parse=as_model(ResourceList))


def resources_get(resource_id: str) -> RequestSpec[Resource]:
    return RequestSpec(
        method="GET",
        path="/resources/{id}",
        path_params={"id": resource_id},
        role="seller",
        parse=as_model(Resource),
    )


def resources_update(
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
) -> RequestSpec[Resource]:
    return RequestSpec(
        method="PATCH",
        path="/resources/{id}",
        path_params={"id": resource_id},
        role="seller",
        json={
            "path": path,
            "tool": tool,
            "amount": None if amount is None else _amount(amount),
            "description": description,
            "metadata": None if metadata is None else _metadata(metadata),
            "upstream_url": upstream_url,
            "listed": listed,
            "active": active,
        },
        parse=as_model(Resource),
    )


def resources_deactivate(resource_id: str) -> RequestSpec[Resource]:
    return RequestSpec(
        method="POST",
        path="/resources/{id}/deactivate",
        path_params={"id": resource_id},
        role="seller",
        json={},
        parse=as_model(Resource),
    )


# --- health and discovery -------------------------------------------------------------------


def health() -> RequestSpec[Health]:
    return RequestSpec(method="GET", path="/health", parse=as_model(Health))


def ready() -> RequestSpec[Health]:
    return RequestSpec(method="GET", path="/ready", parse=as_model(Health))


def capabilities() -> RequestSpec[Capabilities]:
    return RequestSpec(method="GET", path="/agent/capabilities", parse=as_model(Capabilities))


def _discovery_path(name: str) -> str:
    name = name.lstrip("/")
    if name not in DISCOVERY_DOCUMENTS:
        raise ValueError(
            f"unknown discovery document {name!r}; expected one of {DISCOVERY_DOCUMENTS}"
        )
    return "/" + name


def discovery(name: str) -> RequestSpec[str | dict[str, Any]]:
    """A discovery document: ``str`` for the ``.txt`` ones, ``dict`` for the JSON ones."""
    path = _discovery_path(name)
    if path.endswith(".txt"):  # prose for language models; the others are JSON
        return RequestSpec(
            method="GET",
            path=path,
            accept="text/plain, text/markdown;q=0.9, */*;q=0.1",
            parse=as_text,
        )
    return RequestSpec(method="GET", path=path, parse=as_json_object)

# Generated from the route table by `python -m reference_server.sdk_codegen` -- do not edit.
"""Endpoint namespaces of the clients (``client.sellers.me()``...).

Each method builds its spec with ``_endpoints`` and sends it through the client, so every
namespace is the same API on both clients by construction.  Both are generated: this
file from the route table, ``_namespaces`` from this one by ``python -m tests.unasync``.
Adding a namespace: its class docstring in ``reference_server.sdk_codegen``, then
regenerate; the client takes every namespace from :class:`AsyncNamespaces`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from functools import cached_property
from typing import Any, Literal, overload

from . import _endpoints as ep
from ._async_send import AsyncPayUrlStream, AsyncRequester, send_pay_url, send_top_up
from ._convert import Amount, Metadata
from ._models import (
    Approval,
    ApprovalList,
    Balance,
    ConnectAccount,
    ConnectLogin,
    ConnectOnboarding,
    DashboardLink,
    Delivery,
    DeliveryList,
    DirectoryEntry,
    DirectoryList,
    EventCatalog,
    GateChallenge,
    GateRedemption,
    GateRelease,
    Handle,
    HandleResolution,
    ListenBatch,
    OwnerCreated,
    Payment,
    PayUrlQuote,
    PayUrlResult,
    Receipt,
    ReceiptVerification,
    Recycled,
    Refund,
    RefundList,
    Resource,
    ResourceList,
    Seller,
    SellerCreated,
    SellerList,
    SpendAttempt,
    SpendAttemptList,
    SpendBalance,
    TopUp,
    TopUpList,
    WalletKey,
    WalletKeyCreated,
    WalletKeyList,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookEndpointList,
    Withdrawal,
    WithdrawalList,
)
from ._options import RequestOptions
from ._paging import aiterate
from ._types import NOT_GIVEN, NotGiven
from .bodies import (
    ConnectType,
    PayUrlMethod,
    Period,
    ResourceKind,
    ResourceMethod,
    ResourcePricing,
    WebhookStatus,
)

__all__ = [
    "AsyncAccess",
    "AsyncConnect",
    "AsyncDirectory",
    "AsyncGates",
    "AsyncHandles",
    "AsyncNamespaces",
    "AsyncOwners",
    "AsyncPayments",
    "AsyncReceipts",
    "AsyncRefunds",
    "AsyncRequester",
    "AsyncResources",
    "AsyncSellers",
    "AsyncSpend",
    "AsyncTopUps",
    "AsyncWalletKeys",
    "AsyncWebhooks",
    "AsyncWithdrawals",
]


class _Namespace:
    def __init__(self, client: AsyncRequester) -> None:
        self._client = client


class AsyncOwners(_Namespace):
    """Owner sign-up (``POST /owners``), where the server has it enabled."""

    async def create(self, email: str, *, options: RequestOptions | None = None) -> OwnerCreated:
        """Create an owner; the returned ``owner_jwt`` authorizes the owner routes."""
        spec = ep.owners_create(email)
        return await self._client._request(spec, options)

    async def dashboard_link(self, *, options: RequestOptions | None = None) -> DashboardLink:
        """A one-time link that signs the owner in to the dashboard: open it in a
        browser within 10 minutes; it works once."""
        spec = ep.owners_dashboard_link()
        return await self._client._request(spec, options)


class AsyncSellers(_Namespace):
    """Seller accounts: owner routes (create, list) and seller-key routes (``/sellers/me``)."""

    async def create(
        self, name: str | None = None, *, options: RequestOptions | None = None
    ) -> SellerCreated:
        """Create a seller (owner JWT).  Keep ``seller_key``: it is never shown again."""
        spec = ep.sellers_create(name)
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> SellerList:
        """The owner's sellers in this environment (owner JWT), oldest first.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.sellers_list(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def list_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[Seller]:
        """Every seller of the owner, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(lambda after: self.list(limit=limit, starting_after=after, options=options))

    async def me(self, *, options: RequestOptions | None = None) -> Seller:
        """The seller the seller key belongs to."""
        spec = ep.sellers_me()
        return await self._client._request(spec, options)

    async def enable_payments(
        self,
        *,
        processor_profile_id: str | None = None,
        payout_wallet_address: str | None = None,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> Seller:
        """Turn on MPP and x402 for the seller's gates; check ``mpp_enabled`` on the result.

        With ``payout_wallet_address`` (EVM) open-rail USDC goes straight to that wallet
        and the seller balance is not credited.  With ``seller_id``, for that seller of
        the owner (owner JWT).
        """
        spec = ep.sellers_enable_payments(
            processor_profile_id=processor_profile_id,
            payout_wallet_address=payout_wallet_address,
            seller_id=seller_id,
        )
        return await self._client._request(spec, options)

    async def balance(
        self, *, seller_id: str | None = None, options: RequestOptions | None = None
    ) -> Balance:
        """Balance and the payout readiness flags to check before a withdraw.

        With ``seller_id``, that seller's of the owner (owner JWT).
        """
        spec = ep.sellers_balance(seller_id=seller_id)
        return await self._client._request(spec, options)

    async def recycle(
        self, seller_id: str, amount: Amount | None = None, *, options: RequestOptions | None = None
    ) -> Recycled:
        """Owner call: move seller balance (all, or ``amount``) into the account wallet."""
        spec = ep.sellers_recycle(seller_id, amount)
        return await self._client._request(spec, options)

    async def get(self, seller_id: str, *, options: RequestOptions | None = None) -> Seller:
        """One of the owner's sellers (owner JWT; the owner dashboard's :meth:`me`)."""
        spec = ep.sellers_get(seller_id)
        return await self._client._request(spec, options)


class AsyncConnect(_Namespace):
    """The seller's payout account at the processor (Connect): onboarding, readiness, the
    payout dashboard and auto payout.

    Seller key; every method also takes ``seller_id`` to act on one of the owner's sellers
    through the owner dashboard (owner JWT).  No call completes onboarding: hand the
    ``onboard_url`` of :meth:`onboard` to a human, then :meth:`sync`.
    """

    async def status(
        self, *, seller_id: str | None = None, options: RequestOptions | None = None
    ) -> ConnectAccount:
        """The payout account and its flags as of the last :meth:`sync`
        (no processor call)."""
        spec = ep.connect_status(seller_id=seller_id)
        return await self._client._request(spec, options)

    async def update(
        self,
        *,
        auto_payout: bool | NotGiven = NOT_GIVEN,
        auto_payout_minimum: Amount | NotGiven | None = NOT_GIVEN,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> ConnectAccount:
        """Auto payout on or off, and the balance it waits for; a field left out is kept.

        ``auto_payout_minimum=None`` (sent as JSON ``null``) returns to the server's
        default minimum.
        """
        spec = ep.connect_update(
            auto_payout=auto_payout, auto_payout_minimum=auto_payout_minimum, seller_id=seller_id
        )
        return await self._client._request(spec, options)

    async def onboard(
        self,
        country: str,
        type: ConnectType | None = None,
        *,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> ConnectOnboarding:
        """Open the payout account (first call) and get a fresh ``onboard_url``.

        ``country`` is two letters (``"US"``); ``type`` ``"express"`` (the default) or
        ``"standard"``.  A person completes the page in a browser; the link expires
        (``expires_at``), and calling again gives a fresh one.
        """
        spec = ep.connect_onboard(country, type, seller_id=seller_id)
        return await self._client._request(spec, options)

    async def sync(
        self, *, seller_id: str | None = None, options: RequestOptions | None = None
    ) -> ConnectAccount:
        """Read the readiness flags from the processor: ``payouts_enabled`` once a human
        has completed onboarding, ``requirements_due`` otherwise."""
        spec = ep.connect_sync(seller_id=seller_id)
        return await self._client._request(spec, options)

    async def login(
        self, *, seller_id: str | None = None, options: RequestOptions | None = None
    ) -> ConnectLogin:
        """A ``login_url`` to the payout account's dashboard, for a human, once
        onboarded."""
        spec = ep.connect_login(seller_id=seller_id)
        return await self._client._request(spec, options)


class AsyncWithdrawals(_Namespace):
    """Seller balance out to the payout account: ``pending`` ->
    ``in_transit`` -> ``paid``, or ``failed`` (the money is back in the balance).

    Seller key; every method also takes ``seller_id`` for one of the owner's sellers
    (owner JWT).  Withdrawals need ``payouts_enabled`` (see :class:`AsyncConnect`).
    """

    async def create(
        self,
        amount: Amount | None = None,
        *,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> Withdrawal:
        """Withdraw ``amount``, or the whole available balance when it is ``None``.

        The amount leaves the balance at once; watch ``status`` with :meth:`get`.  An
        ``Idempotency-Key`` is sent and reused by retries, so a retried call withdraws once.
        """
        spec = ep.withdrawals_create(amount, seller_id=seller_id)
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> WithdrawalList:
        """The seller's withdrawals, newest first.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.withdrawals_list(limit=limit, starting_after=starting_after, seller_id=seller_id)
        return await self._client._request(spec, options)

    def list_all(
        self,
        *,
        limit: int | None = None,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> AsyncIterator[Withdrawal]:
        """Every withdrawal of the seller, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.list(
                limit=limit, starting_after=after, seller_id=seller_id, options=options
            )
        )

    async def get(
        self,
        withdrawal_id: str,
        *,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> Withdrawal:
        """One withdrawal and its ``status`` (``failure_reason`` when ``failed``)."""
        spec = ep.withdrawals_get(withdrawal_id, seller_id=seller_id)
        return await self._client._request(spec, options)


class AsyncResources(_Namespace):
    """Priced resources (SKUs) of the seller the seller key belongs to."""

    async def create(
        self,
        *,
        kind: ResourceKind,
        amount: Amount | None = None,
        path: str | None = None,
        tool: str | None = None,
        pricing: ResourcePricing | None = None,
        unit_price: Amount | None = None,
        unit: str | None = None,
        max_amount: Amount | None = None,
        fallback_amount: Amount | None = None,
        description: str | None = None,
        metadata: Metadata | None = None,
        upstream_url: str | None = None,
        listed: bool | None = None,
        method: ResourceMethod | None = None,
        body_hint: Mapping[str, Any] | None = None,
        options: RequestOptions | None = None,
    ) -> Resource:
        """Create an HTTP (``path``) or MCP (``tool``) SKU; agents pay its ``gate_url``.

        ``amount`` is validated locally (no floats, at most 6 decimal places).  Metered
        (``pricing="metered"``): ``unit_price``, ``unit`` and ``max_amount`` instead of
        ``amount``, and optionally ``fallback_amount`` for rails that cannot meter.  ``listed``
        shows it in the directory; ``method`` sells one HTTP method only (any when left
        out); ``body_hint`` is a JSON object callers copy with their own values (only with
        ``method`` POST, PUT or PATCH).
        """
        spec = ep.resources_create(
            kind=kind,
            amount=amount,
            path=path,
            tool=tool,
            pricing=pricing,
            unit_price=unit_price,
            unit=unit,
            max_amount=max_amount,
            fallback_amount=fallback_amount,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
            method=method,
            body_hint=body_hint,
        )
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> ResourceList:
        """The seller's resources, oldest first, inactive ones included.  With
        ``seller_id``, that seller's of the owner (owner JWT).

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.resources_list(limit=limit, starting_after=starting_after, seller_id=seller_id)
        return await self._client._request(spec, options)

    def list_all(
        self,
        *,
        limit: int | None = None,
        seller_id: str | None = None,
        options: RequestOptions | None = None,
    ) -> AsyncIterator[Resource]:
        """Every resource of the seller, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.list(
                limit=limit, starting_after=after, seller_id=seller_id, options=options
            )
        )

    async def get(self, resource_id: str, *, options: RequestOptions | None = None) -> Resource:
        spec = ep.resources_get(resource_id)
        return await self._client._request(spec, options)

    async def update(
        self,
        resource_id: str,
        *,
        path: str | None = None,
        tool: str | None = None,
        amount: Amount | None = None,
        unit_price: Amount | None = None,
        unit: str | None = None,
        max_amount: Amount | None = None,
        fallback_amount: Amount | None = None,
        description: str | None = None,
        metadata: Metadata | None = None,
        upstream_url: str | None = None,
        listed: bool | None = None,
        active: bool | None = None,
        method: ResourceMethod | NotGiven | None = NOT_GIVEN,
        body_hint: Mapping[str, Any] | NotGiven | None = NOT_GIVEN,
        options: RequestOptions | None = None,
    ) -> Resource:
        """Change the fields given; ``None`` leaves a field as it is, except ``method``
        and ``body_hint``, which ``None`` clears (any method; no hint)."""
        spec = ep.resources_update(
            resource_id,
            path=path,
            tool=tool,
            amount=amount,
            unit_price=unit_price,
            unit=unit,
            max_amount=max_amount,
            fallback_amount=fallback_amount,
            description=description,
            metadata=metadata,
            upstream_url=upstream_url,
            listed=listed,
            active=active,
            method=method,
            body_hint=body_hint,
        )
        return await self._client._request(spec, options)

    async def deactivate(
        self, resource_id: str, *, options: RequestOptions | None = None
    ) -> Resource:
        """Stop selling the resource (``active`` becomes false); its gate stops
        unlocking."""
        spec = ep.resources_deactivate(resource_id)
        return await self._client._request(spec, options)


class AsyncDirectory(_Namespace):
    """The directory: resources their sellers listed, in the client's
    environment.  No credential is needed (none is sent)."""

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        kind: ResourceKind | None = None,
        q: str | None = None,
        max_amount: Amount | None = None,
        options: RequestOptions | None = None,
    ) -> DirectoryList:
        """Listed, active resources, oldest first: of one ``kind``, whose description
        contains ``q`` (case ignored), priced at most ``max_amount``, as given.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.directory_list(
            limit=limit, starting_after=starting_after, kind=kind, q=q, max_amount=max_amount
        )
        return await self._client._request(spec, options)

    def list_all(
        self,
        *,
        limit: int | None = None,
        kind: ResourceKind | None = None,
        q: str | None = None,
        max_amount: Amount | None = None,
        options: RequestOptions | None = None,
    ) -> AsyncIterator[DirectoryEntry]:
        """Every entry of the directory (with the filters given), in the order of
        :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.list(
                limit=limit,
                starting_after=after,
                kind=kind,
                q=q,
                max_amount=max_amount,
                options=options,
            )
        )


class AsyncWalletKeys(_Namespace):
    """Wallet keys (``svc_vw_*``) of the owner: mint, inspect, change policy,
    fund, revoke.

    Owner JWT; the client's ``environment`` picks Test or Live keys.  Amounts are
    ``Decimal``, ``str`` or ``int``, never ``float``.
    """

    async def create(
        self,
        name: str | None = None,
        *,
        allowance: Amount | None = None,
        max_per_tx: Amount | None = None,
        budget: Amount | None = None,
        period: Period | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allowed_rails: Sequence[str] | None = None,
        approval_above: Amount | None = None,
        approval_hosts: Sequence[str] | None = None,
        approval_ttl_seconds: int | None = None,
        options: RequestOptions | None = None,
    ) -> WalletKeyCreated:
        """Mint a key with a policy; limits left out (or ``None``) are unlimited.

        ``allowance`` may be spent per ``period`` (``day``, ``week``, ``month`` or
        ``none``), ``max_per_tx`` per payment and ``budget`` in total.  Keep ``key``: it is
        never shown again.  A new key has no money until :meth:`fund`.  A payment
        above ``approval_above``, or to one of ``approval_hosts``, waits for a person
        (:class:`~svc.ApprovalRequired`, docs/approvals.md) for up to
        ``approval_ttl_seconds`` (default 900).
        """
        spec = ep.wallet_keys_create(
            name,
            allowance=allowance,
            max_per_tx=max_per_tx,
            budget=budget,
            period=period,
            allowed_hosts=allowed_hosts,
            allowed_rails=allowed_rails,
            approval_above=approval_above,
            approval_hosts=approval_hosts,
            approval_ttl_seconds=approval_ttl_seconds,
        )
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> WalletKeyList:
        """The owner's wallet keys in this environment, oldest first, revoked ones
        included.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.wallet_keys_list(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def list_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[WalletKey]:
        """Every wallet key of the owner, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(lambda after: self.list(limit=limit, starting_after=after, options=options))

    async def get(self, wallet_key_id: str, *, options: RequestOptions | None = None) -> WalletKey:
        spec = ep.wallet_keys_get(wallet_key_id)
        return await self._client._request(spec, options)

    async def update(
        self,
        wallet_key_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        allowance: Amount | NotGiven | None = NOT_GIVEN,
        max_per_tx: Amount | NotGiven | None = NOT_GIVEN,
        budget: Amount | NotGiven | None = NOT_GIVEN,
        period: Period | NotGiven = NOT_GIVEN,
        allowed_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN,
        allowed_rails: Sequence[str] | NotGiven | None = NOT_GIVEN,
        approval_above: Amount | NotGiven | None = NOT_GIVEN,
        approval_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN,
        approval_ttl_seconds: int | NotGiven | None = NOT_GIVEN,
        options: RequestOptions | None = None,
    ) -> WalletKey:
        """Change the fields given.  ``None`` removes that limit; a field left out is kept.

        ``period="none"`` stops the allowance from resetting.
        """
        spec = ep.wallet_keys_update(
            wallet_key_id,
            name=name,
            allowance=allowance,
            max_per_tx=max_per_tx,
            budget=budget,
            period=period,
            allowed_hosts=allowed_hosts,
            allowed_rails=allowed_rails,
            approval_above=approval_above,
            approval_hosts=approval_hosts,
            approval_ttl_seconds=approval_ttl_seconds,
        )
        return await self._client._request(spec, options)

    async def fund(
        self, wallet_key_id: str, amount: Amount, *, options: RequestOptions | None = None
    ) -> WalletKey:
        """Add prepaid balance from the owner's account wallet (Test: instant sandbox
        money)."""
        spec = ep.wallet_keys_fund(wallet_key_id, amount)
        return await self._client._request(spec, options)

    async def refund(
        self, wallet_key_id: str, amount: Amount, *, options: RequestOptions | None = None
    ) -> WalletKey:
        """Move unspent balance back to the owner's account wallet."""
        spec = ep.wallet_keys_refund(wallet_key_id, amount)
        return await self._client._request(spec, options)

    async def revoke(
        self, wallet_key_id: str, *, options: RequestOptions | None = None
    ) -> WalletKey:
        """Stop the key for good; every later call with it is refused."""
        spec = ep.wallet_keys_revoke(wallet_key_id)
        return await self._client._request(spec, options)


class AsyncTopUps(_Namespace):
    """Money in: the owner pays their account wallet from a wallet they control
    (owner JWT).

    ``POST /owners/me/top-ups`` answers 402 with an x402 ``PAYMENT-REQUIRED`` and an MPP
    ``WWW-Authenticate: Payment`` challenge paying the environment's deposit address (Test:
    the sandbox chain; pay from a faucet wallet).  The same request retried with the
    credential answers the settled :class:`~svc.TopUp`, credited to the account wallet.
    """

    async def create(
        self,
        amount: Amount,
        *,
        payer: Any = None,
        method: str | None = None,
        options: RequestOptions | None = None,
    ) -> TopUp:
        """Top up the account wallet by ``amount``.

        ``method="card"`` (live, with the processor): a ``pending`` top-up comes back at
        once; pay it at its ``checkout_url``, and it is ``succeeded`` once the processor
        says it was paid (``funding.paid``).

        With ``payer`` (an eth-account ``LocalAccount`` or a ``0x…`` private key; needs
        the ``rails`` extra) the SDK pays the challenge itself with the official x402
        client, signing only for exactly ``amount``, and retries with the same
        ``Idempotency-Key``: one call, one payment.  Without it the challenge comes back
        as :class:`~svc.PaymentRequiredError`, its ``headers`` holding
        ``PAYMENT-REQUIRED`` and ``WWW-Authenticate``, for you to pay and retry with
        ``options=RequestOptions(idempotency_key=..., extra_headers={"PAYMENT-SIGNATURE":
        ...})``, as any x402 client would.
        """
        spec = ep.top_ups_create(amount, method=method)
        return await send_top_up(
            self._client, spec, options, amount=amount, payer=payer, method=method
        )

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> TopUpList:
        """The owner's top-ups in this environment, newest first.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.top_ups_list(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def list_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[TopUp]:
        """Every top-up of the owner, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(lambda after: self.list(limit=limit, starting_after=after, options=options))

    async def get(self, top_up_id: str, *, options: RequestOptions | None = None) -> TopUp:
        spec = ep.top_ups_get(top_up_id)
        return await self._client._request(spec, options)


class AsyncSpend(_Namespace):
    """The wallet key's (``svc_vw_*``) spending: what is left, and paying any 402 URL."""

    async def balance(self, *, options: RequestOptions | None = None) -> SpendBalance:
        """Prepaid balance, policy and what is left of the allowance and budget."""
        spec = ep.spend_balance()
        return await self._client._request(spec, options)

    async def attempts(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> SpendAttemptList:
        """The key's ``pay-url`` attempts, newest first, with their status and error.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`attempts_all`.
        """
        spec = ep.spend_attempts(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def attempts_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[SpendAttempt]:
        """Every ``pay-url`` attempt of the key, in the order of :meth:`attempts`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.attempts(limit=limit, starting_after=after, options=options)
        )

    async def approvals(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> ApprovalList:
        """The key's approvals (payments that wait or waited for a person), newest
        first.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`approvals_all`.
        """
        spec = ep.spend_approvals(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def approvals_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[Approval]:
        """Every approval of the key, in the order of :meth:`approvals`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.approvals(limit=limit, starting_after=after, options=options)
        )

    async def approval(
        self, approval_id: str, *, options: RequestOptions | None = None
    ) -> Approval:
        """One approval: ``pending`` (with ``approval_url``), ``approved``,
        ``declined``, ``expired`` or ``used`` (with ``receipt_id``)."""
        spec = ep.spend_approval(approval_id)
        return await self._client._request(spec, options)

    @overload
    async def pay_url(
        self,
        url: str,
        *,
        method: PayUrlMethod = "GET",
        json: Any = None,
        stream: Literal[False] = False,
        options: RequestOptions | None = None,
    ) -> PayUrlResult: ...
    @overload
    async def pay_url(
        self,
        url: str,
        *,
        method: PayUrlMethod = "GET",
        json: Any = None,
        stream: Literal[True],
        options: RequestOptions | None = None,
    ) -> AsyncPayUrlStream: ...
    async def pay_url(
        self,
        url: str,
        *,
        method: PayUrlMethod = "GET",
        json: Any = None,
        stream: bool = False,
        options: RequestOptions | None = None,
    ) -> PayUrlResult | AsyncPayUrlStream:
        """Pay ``url``'s x402 or MPP 402 under the key's policy and return its answer.

        ``json`` is a JSON body for the URL (``method="POST"`` only).  The service probes
        the URL, pays on a rail the policy allows, and returns the unlocked body (cut at
        8 KB, ``body_truncated``) with ``receipt_id`` and ``tx_hash``.  An
        ``Idempotency-Key`` is sent and reused by retries, so a retried call pays once
        and gets the stored answer.  A policy limit raises
        :class:`~svc.PaymentRequiredError`; a URL that does not ask for payment, or asks
        in a way this environment cannot pay, :class:`~svc.UnprocessableEntityError`.
        A payment over the key's approval line raises :class:`~svc.ApprovalRequired`:
        show its ``approval.approval_url`` to a person, then call again with the same
        ``RequestOptions(idempotency_key=...)`` (docs/approvals.md).

        ``stream=True`` returns, once the paid answer's head is in, a stream to iterate
        for the body's bytes as they arrive (uncut); after it, ``.result`` is the
        PayUrlResult (without the body) and ``.head`` the URL's status and headers.  An
        answer that breaks off midway raises the service's error at its end; use it as a
        context manager to close the connection.  Errors before the head raise here.
        """
        spec = ep.spend_pay_url(url, method=method, json=json)
        return await send_pay_url(
            self._client, spec, options, url=url, method=method, json=json, stream=stream
        )

    async def pay_url_quote(
        self,
        url: str,
        *,
        method: PayUrlMethod = "GET",
        json: Any = None,
        options: RequestOptions | None = None,
    ) -> PayUrlQuote:
        """A dry run of :meth:`pay_url`: probe ``url`` and say what paying it would do.

        Nothing is paid, reserved or recorded.  The answer names the ``rail``, ``amount``,
        ``network`` and ``pay_to`` the service would pay, whether the key's policy and
        balance allow it (``allowed``), and if not the rule that blocks it
        (``blocked_by.code``: ``max_per_tx_exceeded``, ``allowance_exceeded`` with
        ``details.next_reset_at``, ``budget_exceeded``, ``host_not_allowed``,
        ``rail_not_allowed``, ``insufficient_funds``) with its numbers in
        ``blocked_by.details``.  A URL that cannot be paid at all raises as
        :meth:`pay_url` does.
        """
        spec = ep.spend_pay_url_quote(url, method=method, json=json)
        return await self._client._request(spec, options)


class AsyncHandles(_Namespace):
    """Handles (``@name``): ledger addresses of an owner's account wallet."""

    async def create(self, handle: str, *, options: RequestOptions | None = None) -> Handle:
        """Claim ``handle`` (``"name"`` or ``"@name"``) for the owner (owner JWT)."""
        spec = ep.handles_create(handle)
        return await self._client._request(spec, options)

    async def resolve(
        self, destination: str, *, options: RequestOptions | None = None
    ) -> HandleResolution:
        """Check a transfer destination before paying it (wallet key)."""
        spec = ep.handles_resolve(destination)
        return await self._client._request(spec, options)


class AsyncAccess(_Namespace):
    """Receipt checks for sellers; the route is public."""

    async def verify(
        self,
        receipt_id: str,
        resource_id: str | None = None,
        *,
        options: RequestOptions | None = None,
    ) -> ReceiptVerification:
        """Whether ``receipt_id`` is a valid receipt (for ``resource_id``, when given).

        An unknown receipt is ``valid=False``, not an error.  The seller key is sent when
        the client (or ``options``) has one, and nothing otherwise.
        """
        spec = ep.access_verify(receipt_id, resource_id)
        return await self._client._request(spec, options)


class AsyncReceipts(_Namespace):
    """Receipts as their payer (wallet key) or their seller (seller key) reads
    them, and the capture of a metered ledger payment by its seller."""

    async def get(self, receipt_id: str, *, options: RequestOptions | None = None) -> Receipt:
        """One receipt, as its payer or its seller reads it (status, amount, units).

        Sent with the wallet key when the client has one, else the seller key, else
        the owner JWT.
        """
        spec = ep.receipts_get(receipt_id)
        return await self._client._request(spec, options)

    async def capture(
        self, receipt_id: str, *, units: int, options: RequestOptions | None = None
    ) -> Receipt:
        """Capture a metered ledger payment: charge the ``units`` its answer used
        (at most the authorised maximum; 0 releases it)."""
        spec = ep.receipts_capture(receipt_id, units=units)
        return await self._client._request(spec, options)


class AsyncPayments(_Namespace):
    """Where a payment stands (``claimed``, ``settled``, ``released``,
    ``refunded``), for its payer, its seller or the owner of either."""

    async def get(self, receipt_id: str, *, options: RequestOptions | None = None) -> Payment:
        """Where a payment stands, for a client that lost the answer: ``state``
        ``claimed``, ``settled``, ``released`` or ``refunded`` (``refunded`` and
        ``remaining`` say how much).

        Sent with the wallet key when the client has one, else the seller key, else
        the owner JWT.
        """
        spec = ep.payments_get(receipt_id)
        return await self._client._request(spec, options)


class AsyncRefunds(_Namespace):
    """Refunds (seller key): all or part of a payment given back, never more
    than was paid."""

    async def create(
        self,
        receipt_id: str,
        *,
        amount: Amount | None = None,
        reason: str | None = None,
        options: RequestOptions | None = None,
    ) -> Refund:
        """Give back ``amount`` of a payment (``None``: all that is not refunded
        yet), never more than was paid across refunds.

        On the ledger rail the money goes back to the payer's wallet key at once, from
        the seller's balance (refused with ``insufficient_balance`` when the balance is
        lower); a card payment's through the card processor (in live, ``status``
        ``pending`` until the processor has refunded it, ``failed`` if it refuses).
        An ``Idempotency-Key`` is sent and reused by retries, so a retried call
        refunds once.
        """
        spec = ep.refunds_create(receipt_id, amount=amount, reason=reason)
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> RefundList:
        """The seller's refunds, newest first.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.refunds_list(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def list_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[Refund]:
        """Every refund of the seller, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(lambda after: self.list(limit=limit, starting_after=after, options=options))

    async def get(self, refund_id: str, *, options: RequestOptions | None = None) -> Refund:
        """One of the seller's refunds."""
        spec = ep.refunds_get(refund_id)
        return await self._client._request(spec, options)


class AsyncGates(_Namespace):
    """Open rails at the seller's own gate (seller key): what ``svc_asgi`` asks
    the service.

    A gate in front of the seller's app gets the x402 / MPP challenge for an unpaid
    request with :meth:`challenge`, verifies and claims a presented credential with
    :meth:`redeem`, serves the request, then :meth:`settle` s the claim when the answer
    succeeded or :meth:`release` s it when it failed; the service holds every key and
    settles, the app holds none.
    """

    async def challenge(
        self, resource_id: str, *, method: str, url: str, options: RequestOptions | None = None
    ) -> GateChallenge:
        """The 402's challenge headers for ``method`` ``url`` (absolute, as the client
        addressed it); empty while the seller has not enabled payments."""
        spec = ep.gates_challenge(resource_id, method=method, url=url)
        return await self._client._request(spec, options)

    async def redeem(
        self,
        resource_id: str,
        *,
        method: str,
        url: str,
        headers: Mapping[str, str],
        options: RequestOptions | None = None,
    ) -> GateRedemption:
        """Verify the credential in ``headers`` (only ``PAYMENT-SIGNATURE`` and
        ``Authorization: Payment …`` are sent) for the request ``method`` ``url`` and claim
        it: a verified one comes back with ``claim`` set, nothing moved yet."""
        spec = ep.gates_redeem(resource_id, method=method, url=url, headers=headers)
        return await self._client._request(spec, options)

    async def settle(
        self, claim: str, units: int | None = None, *, options: RequestOptions | None = None
    ) -> GateRedemption:
        """Settle a claim whose answer succeeded: ``paid`` with the receipt and the paid
        answer's headers, or refused (nothing moved: withhold the answer, answer 402).
        ``units``: what the answer used of a metered resource paid with x402 ``upto``
        (``units * unit_price``, at most its ``max_amount``; omitted, the maximum); ``0``
        releases the claim, nothing charged: ``paid`` false, ``reason`` ``released``."""
        spec = ep.gates_settle(claim, units)
        return await self._client._request(spec, options)

    async def release(
        self,
        claim: str,
        *,
        status: int | None = None,
        reason: str = "answer_failed",
        options: RequestOptions | None = None,
    ) -> GateRelease:
        """Release a claim whose answer failed (``status``) or never came
        (``reason="answer_missing"``): nothing is charged."""
        spec = ep.gates_release(claim, status=status, reason=reason)
        return await self._client._request(spec, options)


class AsyncWebhooks(_Namespace):
    """Webhook endpoints of the owner (owner JWT), in the client's ``environment``.

    An endpoint receives the signed events of its environment (all of them, or the
    ``events`` it lists); check each delivery with :func:`svc.webhooks.verify`.
    """

    async def create(
        self,
        url: str,
        *,
        events: Sequence[str] | None = None,
        description: str | None = None,
        options: RequestOptions | None = None,
    ) -> WebhookEndpointCreated:
        """Register ``url`` (HTTPS; ``http://localhost`` outside production).

        ``events`` limits it to those event types (see :meth:`events`); ``None``: every
        event, including types added later.  Keep ``signing_secret``: it is never shown
        again.  An ``Idempotency-Key`` is always sent, so a retried create registers once.
        """
        spec = ep.webhooks_create(url, events=events, description=description)
        return await self._client._request(spec, options)

    async def list(
        self,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> WebhookEndpointList:
        """The owner's endpoints in this environment, oldest first; deleted ones are
        gone.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`list_all`.
        """
        spec = ep.webhooks_list(limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def list_all(
        self, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[WebhookEndpoint]:
        """Every endpoint of the owner, in the order of :meth:`list`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(lambda after: self.list(limit=limit, starting_after=after, options=options))

    async def events(self, *, options: RequestOptions | None = None) -> EventCatalog:
        """The event catalog: every event type the service emits, with what causes it."""
        spec = ep.webhooks_events()
        return await self._client._request(spec, options)

    async def update(
        self,
        webhook_id: str,
        *,
        events: Sequence[str] | NotGiven | None = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        status: WebhookStatus | NotGiven = NOT_GIVEN,
        options: RequestOptions | None = None,
    ) -> WebhookEndpoint:
        """Change the fields given; a field left out keeps its value.

        ``events=None`` (sent as JSON ``null``) subscribes the endpoint to every event;
        ``description=""`` clears the description; ``status="enabled"`` re-enables an
        endpoint that was disabled (by you, or after failing deliveries).
        """
        spec = ep.webhooks_update(webhook_id, events=events, description=description, status=status)
        return await self._client._request(spec, options)

    async def delete(
        self, webhook_id: str, *, options: RequestOptions | None = None
    ) -> WebhookEndpoint:
        """Delete the endpoint: the result has ``status`` ``deleted``, its pending
        deliveries are cancelled, and later calls with its id raise
        :class:`~svc.NotFoundError`."""
        spec = ep.webhooks_delete(webhook_id)
        return await self._client._request(spec, options)

    async def deliveries(
        self,
        webhook_id: str,
        *,
        limit: int | None = None,
        starting_after: str | None = None,
        options: RequestOptions | None = None,
    ) -> DeliveryList:
        """The delivery log, newest first, each with its ``attempt_log``.

        One page: ``limit`` 1 to 100 (the service's default is 20); pass the last item's
        ``id`` as ``starting_after`` for the next page while ``has_more`` is true, or use
        :meth:`deliveries_all`.
        """
        spec = ep.webhooks_deliveries(webhook_id, limit=limit, starting_after=starting_after)
        return await self._client._request(spec, options)

    def deliveries_all(
        self, webhook_id: str, *, limit: int | None = None, options: RequestOptions | None = None
    ) -> AsyncIterator[Delivery]:
        """Every delivery of the endpoint, in the order of :meth:`deliveries`.

        Pages of ``limit`` are fetched as the iteration reaches them.
        """
        return aiterate(
            lambda after: self.deliveries(
                webhook_id, limit=limit, starting_after=after, options=options
            )
        )

    async def test(self, webhook_id: str, *, options: RequestOptions | None = None) -> Delivery:
        """Send a signed sample ``payment.succeeded`` (``test: true``) now; returns its
        delivery, with the receiver's answer in ``attempt_log``."""
        spec = ep.webhooks_test(webhook_id)
        return await self._client._request(spec, options)

    async def retry(
        self, webhook_id: str, delivery_id: str, *, options: RequestOptions | None = None
    ) -> Delivery:
        """Send one delivery again now, whatever its state; the delivery keeps its ``id``
        and the attempt joins its ``attempt_log``."""
        spec = ep.webhooks_retry(webhook_id, delivery_id)
        return await self._client._request(spec, options)

    async def listen(
        self, *, events: Sequence[str] | None = None, options: RequestOptions | None = None
    ) -> WebhookEndpointCreated:
        """Register a listener endpoint (Test only) for ``svc listen``: its deliveries
        are handed to :meth:`poll` instead of being sent over HTTP."""
        spec = ep.webhooks_listen(events=events)
        return await self._client._request(spec, options)

    async def poll(
        self, webhook_id: str, *, wait: float = 0, options: RequestOptions | None = None
    ) -> ListenBatch:
        """The listener's next due deliveries, each with its signed headers and body,
        waiting up to ``wait`` seconds (30 at most) for one."""
        spec = ep.webhooks_poll(webhook_id, wait=wait)
        return await self._client._request(spec, options)

    async def ack(
        self,
        webhook_id: str,
        *,
        delivery_id: str,
        status_code: int | None = None,
        error: str | None = None,
        options: RequestOptions | None = None,
    ) -> ListenBatch:
        """Record the local receiver's answer to one listened delivery."""
        spec = ep.webhooks_ack(
            webhook_id, delivery_id=delivery_id, status_code=status_code, error=error
        )
        return await self._client._request(spec, options)


class AsyncNamespaces:
    """Every namespace of the client (``client.sellers``...), made on first use and kept:
    the client inherits them, so a new namespace needs no line of the client."""

    owners = cached_property(AsyncOwners)
    sellers = cached_property(AsyncSellers)
    connect = cached_property(AsyncConnect)
    withdrawals = cached_property(AsyncWithdrawals)
    resources = cached_property(AsyncResources)
    directory = cached_property(AsyncDirectory)
    wallet_keys = cached_property(AsyncWalletKeys)
    top_ups = cached_property(AsyncTopUps)
    spend = cached_property(AsyncSpend)
    handles = cached_property(AsyncHandles)
    access = cached_property(AsyncAccess)
    receipts = cached_property(AsyncReceipts)
    payments = cached_property(AsyncPayments)
    refunds = cached_property(AsyncRefunds)
    gates = cached_property(AsyncGates)
    webhooks = cached_property(AsyncWebhooks)

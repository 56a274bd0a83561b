"""Every endpoint the SDK calls, written once as a :class:`~svc._spec.RequestSpec`.

The namespace classes of the sync and async clients only call these functions and send
the result, so the route, credential, body and response model of an endpoint live in
exactly one place.  Arguments are checked here, before anything is sent: a float price or
seven decimal places fail locally with ``ValueError`` instead of reaching the service.

To add an endpoint: write a function here, then a one-line method in the sync and async
namespace (``_namespaces`` / ``_async_namespaces``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from ._models import (
    Balance,
    Capabilities,
    ConnectAccount,
    ConnectLogin,
    ConnectOnboarding,
    Delivery,
    DeliveryList,
    DirectoryList,
    EventCatalog,
    GateChallenge,
    GateRedemption,
    GateRelease,
    Handle,
    HandleResolution,
    Health,
    OwnerCreated,
    PayResult,
    PayUrlQuote,
    PayUrlResult,
    ReceiptVerification,
    Recycled,
    Resource,
    ResourceList,
    ResourceMetadata,
    Seller,
    SellerCreated,
    SellerList,
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
from ._spec import RequestSpec, Role, as_json_object, as_model, as_text
from ._types import NOT_GIVEN, NotGiven
from .bodies import (
    ClaimHandle,
    ConnectOnboard,
    CreateOwner,
    CreateSeller,
    CreateWalletKey,
    CreateWebhook,
    EnablePayments,
    Pay,
    PayUrl,
    RecycleBalance,
    RedeemCredential,
    ReleaseClaim,
    RequestChallenge,
    SettleClaim,
    UpdateConnect,
    UpdateWalletKey,
    UpdateWebhook,
    VerifyReceipt,
    WalletKeyAmount,
    WalletKeyPolicy,
    Withdraw,
    to_json,
)
from .money import format_amount, parse_amount
from .receipts import rail_credentials
from .wire import unstructure

__all__ = [
    "CONNECT_TYPES",
    "DISCOVERY_DOCUMENTS",
    "MAX_PAGE_LIMIT",
    "PAY_URL_METHODS",
    "PERIODS",
    "WEBHOOK_STATUSES",
    "Amount",
    "ConnectType",
    "DiscoveryDocument",
    "JSONDocument",
    "Metadata",
    "PayUrlMethod",
    "Period",
    "ResourceKind",
    "ResourceMethod",
    "TextDocument",
    "WebhookStatus",
    "access_verify",
    "capabilities",
    "connect_login",
    "connect_onboard",
    "connect_status",
    "connect_sync",
    "connect_update",
    "directory_list",
    "discovery",
    "gates_challenge",
    "gates_redeem",
    "gates_release",
    "gates_settle",
    "handles_create",
    "handles_resolve",
    "health",
    "owners_create",
    "pay",
    "ready",
    "resources_create",
    "resources_deactivate",
    "resources_get",
    "resources_list",
    "resources_update",
    "sellers_balance",
    "sellers_create",
    "sellers_enable_payments",
    "sellers_get",
    "sellers_list",
    "sellers_me",
    "sellers_recycle",
    "spend_attempts",
    "spend_balance",
    "spend_pay_url",
    "spend_pay_url_quote",
    "top_ups_create",
    "top_ups_get",
    "top_ups_list",
    "wallet_keys_create",
    "wallet_keys_fund",
    "wallet_keys_get",
    "wallet_keys_list",
    "wallet_keys_refund",
    "wallet_keys_revoke",
    "wallet_keys_update",
    "webhooks_create",
    "webhooks_delete",
    "webhooks_deliveries",
    "webhooks_events",
    "webhooks_list",
    "webhooks_retry",
    "webhooks_test",
    "webhooks_update",
    "withdrawals_create",
    "withdrawals_get",
    "withdrawals_list",
]


#: A price: ``Decimal("0.05")``, ``"0.05"`` or a whole number of dollars.  Never a float.
Amount = Decimal | str | int
#: Resource metadata as a plain dict or the typed model.
Metadata = Mapping[str, Any] | ResourceMetadata
ResourceKind = Literal["http", "mcp"]
ResourceMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
#: How often a wallet key's ``allowance`` resets; ``"none"``: it never does.
Period = Literal["day", "week", "month", "none"]
PERIODS: tuple[str, ...] = ("day", "week", "month", "none")
#: What an owner may set a webhook endpoint to (``deleted`` is reached by deleting it).
WebhookStatus = Literal["enabled", "disabled"]
WEBHOOK_STATUSES: tuple[str, ...] = ("enabled", "disabled")
#: The payout account's kind at the processor (``express`` when left out).
ConnectType = Literal["express", "standard"]
CONNECT_TYPES: tuple[str, ...] = ("express", "standard")
#: Most items one page of any list holds (``limit``; the service's default is 20).
MAX_PAGE_LIMIT = 100
#: How ``pay-url`` requests the URL; a POST-only 402 needs ``POST`` and a JSON body.
PayUrlMethod = Literal["GET", "POST"]
PAY_URL_METHODS: tuple[str, ...] = ("GET", "POST")
TextDocument = Literal["llms.txt", "llms-full.txt"]
JSONDocument = Literal[".well-known/agent.json", "agent-openapi.json"]
DiscoveryDocument = TextDocument | JSONDocument
DISCOVERY_DOCUMENTS: tuple[str, ...] = (
    "llms.txt",
    "llms-full.txt",
    ".well-known/agent.json",
    "agent-openapi.json",
)


def _amount(value: Amount, name: str = "amount") -> str:
    """A sum of money to move or a price: in the amount grammar, more than zero, sent in
    canonical form.  The grammar is :func:`parse_amount`'s, the one the server reads with."""
    return format_amount(_positive(value, name))


def _positive(value: Amount, name: str = "amount") -> Decimal:
    """:func:`_amount` as the :class:`~decimal.Decimal` a body of :mod:`svc.bodies` holds
    (sent in canonical form)."""
    amount = parse_amount(value, name=name)
    if amount <= 0:
        raise ValueError(f"{name} must be greater than zero, got {format_amount(amount)}")
    return amount


def _metadata(value: Metadata) -> dict[str, Any]:
    if isinstance(value, ResourceMetadata):
        # The typed model writes unset optional keys as null; leave them out instead.
        flat: dict[str, Any] = unstructure(value)
        return {k: v for k, v in flat.items() if v is not None}
    return dict(value)


def _limit(name: str, value: Amount) -> str:
    """A policy limit: an amount that may be zero (nothing allowed); never negative."""
    return format_amount(parse_amount(value, name=name))


def _period(value: object) -> str:
    if not isinstance(value, str) or value not in PERIODS:
        raise ValueError(
            f"period must be one of {PERIODS} ('none': the allowance never resets), got {value!r}"
        )
    return value


def _names(name: str, value: Sequence[str]) -> list[str]:
    """A list of hosts or rails; a lone string is refused rather than split into letters."""
    if isinstance(value, str):
        raise ValueError(f"{name} must be a list of strings, not a single string")
    items = list(value)
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{name} must hold non-empty strings, got {item!r}")
    return items


def _page(limit: int | None, starting_after: str | None) -> dict[str, str] | None:
    """The one paging contract of every list: ``limit`` (1 to :data:`MAX_PAGE_LIMIT`) and
    ``starting_after`` (the id of the previous page's last item), sent only when given."""
    query: dict[str, str] = {}
    if limit is not None:
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_PAGE_LIMIT
        ):
            raise ValueError(
                f"limit must be a whole number from 1 to {MAX_PAGE_LIMIT}, got {limit!r}"
            )
        query["limit"] = str(limit)
    if starting_after is not None:
        query["starting_after"] = _text("starting_after", starting_after)
    return query or None


def _text(name: str, value: object) -> str:
    """A required string sent in a body (path parameters are checked by the client)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _policy(
    *,
    allowance: Amount | NotGiven | None,
    max_per_tx: Amount | NotGiven | None,
    budget: Amount | NotGiven | None,
    period: Period | NotGiven,
    allowed_hosts: Sequence[str] | NotGiven | None,
    allowed_rails: Sequence[str] | NotGiven | None,
) -> dict[str, Any]:
    """The ``policy`` object: fields not given are left out, ``None`` is sent as ``null``
    (which clears that limit on update; on create it is the same as leaving it out).

    Built from :class:`~svc.bodies.WalletKeyPolicy`; :func:`~svc.bodies.to_json` leaves
    out every ``None``, so the fields given as ``None`` are added back as ``null`` after
    it.  The object is nested in the body, so its ``null`` values survive encoding (only
    top-level ``None`` values are dropped by the client).
    """
    given: dict[str, Any] = {}
    cleared: list[str] = []
    limits = (("allowance", allowance), ("max_per_tx", max_per_tx), ("budget", budget))
    for name, amount in limits:
        if amount is None:
            cleared.append(name)
        elif not isinstance(amount, NotGiven):
            given[name] = parse_amount(_limit(name, amount))
    if not isinstance(period, NotGiven):
        given["period"] = _period(period)
    for name, names in (("allowed_hosts", allowed_hosts), ("allowed_rails", allowed_rails)):
        if names is None:
            cleared.append(name)
        elif not isinstance(names, NotGiven):
            given[name] = _names(name, names)
    policy = {**to_json(WalletKeyPolicy(**given)), **dict.fromkeys(cleared)}
    return {name: policy[name] for name in _POLICY_FIELDS if name in policy}


_POLICY_FIELDS = ("allowance", "max_per_tx", "budget", "period", "allowed_hosts", "allowed_rails")


def _given(value: Any) -> Any:
    """On create, ``None`` means "no limit", which is what leaving the field out means."""
    return NOT_GIVEN if value is None else value


# --- owners ---------------------------------------------------------------------------------


def owners_create(email: str) -> RequestSpec[OwnerCreated]:
    return RequestSpec(
        method="POST",
        path="/owners",
        json=to_json(CreateOwner(email=email)),
        parse=as_model(OwnerCreated),
    )


# --- sellers --------------------------------------------------------------------------------


def sellers_create(name: str | None = None) -> RequestSpec[SellerCreated]:
    return RequestSpec(
        method="POST",
        path="/sellers",
        role=Role.OWNER,
        json=to_json(CreateSeller(name=name)),
        parse=as_model(SellerCreated),
    )


def sellers_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[SellerList]:
    """``GET /sellers``: oldest first."""
    return RequestSpec(
        method="GET",
        path="/sellers",
        role=Role.OWNER,
        query=_page(limit, starting_after),
        parse=as_model(SellerList),
    )


def _seller_route(seller_id: str | None, tail: str = "") -> dict[str, Any]:
    """Where a seller route is: ``/sellers/me{tail}`` with the seller key, or, given
    ``seller_id``, its owner dashboard twin ``/sellers/{seller_id}{tail}`` with the owner
    JWT (the same body and answer; the service answers 404 for another owner's seller)."""
    if seller_id is None:
        return {"path": "/sellers/me" + tail, "role": Role.SELLER}
    return {
        "path": "/sellers/{seller_id}" + tail,
        "role": Role.OWNER,
        "path_params": {"seller_id": seller_id},
    }


def sellers_me() -> RequestSpec[Seller]:
    return RequestSpec(method="GET", parse=as_model(Seller), **_seller_route(None))


def sellers_get(seller_id: str) -> RequestSpec[Seller]:
    """``GET /sellers/{seller_id}``: one of the owner's sellers (owner dashboard)."""
    return RequestSpec(method="GET", parse=as_model(Seller), **_seller_route(seller_id))


def sellers_enable_payments(
    processor_profile_id: str | None = None,
    payout_wallet_address: str | None = None,
    *,
    seller_id: str | None = None,
) -> RequestSpec[Seller]:
    return RequestSpec(
        method="PATCH",
        json=to_json(
            EnablePayments(
                processor_profile_id=processor_profile_id,
                payout_wallet_address=payout_wallet_address,
            )
        ),
        parse=as_model(Seller),
        **_seller_route(seller_id, "/payments"),
    )


def sellers_balance(*, seller_id: str | None = None) -> RequestSpec[Balance]:
    return RequestSpec(
        method="GET", parse=as_model(Balance), **_seller_route(seller_id, "/balance")
    )


def sellers_recycle(seller_id: str, amount: Amount | None = None) -> RequestSpec[Recycled]:
    """Owner route: seller balance (all, or ``amount``) into the owner's account wallet."""
    return RequestSpec(
        method="POST",
        path="/sellers/{seller_id}/recycle",
        role=Role.OWNER,
        path_params={"seller_id": seller_id},
        json=to_json(RecycleBalance(amount=None if amount is None else _positive(amount))),
        parse=as_model(Recycled),
    )


# --- payouts: Connect and withdrawals (seller key, or owner JWT with seller_id) ------------


def connect_status(*, seller_id: str | None = None) -> RequestSpec[ConnectAccount]:
    """``GET /sellers/me/connect``: the payout account as of the last sync."""
    return RequestSpec(
        method="GET", parse=as_model(ConnectAccount), **_seller_route(seller_id, "/connect")
    )


def connect_onboard(
    country: str, type: ConnectType | None = None, *, seller_id: str | None = None
) -> RequestSpec[ConnectOnboarding]:
    """``POST /sellers/me/connect/onboard``: a fresh ``onboard_url`` for a human."""
    if not isinstance(country, str) or len(country) != 2 or not country.isascii():
        raise ValueError(f"country must be a two-letter country code such as 'US', got {country!r}")
    if type is not None and type not in CONNECT_TYPES:
        raise ValueError(f"type must be one of {CONNECT_TYPES}, got {type!r}")
    return RequestSpec(
        method="POST",
        json=to_json(ConnectOnboard(country=country.upper(), type=type)),
        parse=as_model(ConnectOnboarding),
        **_seller_route(seller_id, "/connect/onboard"),
    )


def connect_sync(*, seller_id: str | None = None) -> RequestSpec[ConnectAccount]:
    """``POST /sellers/me/connect/sync``: read the readiness flags from the processor."""
    return RequestSpec(
        method="POST",
        json={},
        parse=as_model(ConnectAccount),
        **_seller_route(seller_id, "/connect/sync"),
    )


def connect_login(*, seller_id: str | None = None) -> RequestSpec[ConnectLogin]:
    """``POST /sellers/me/connect/login``: the payout dashboard's ``login_url``."""
    return RequestSpec(
        method="POST",
        json={},
        parse=as_model(ConnectLogin),
        **_seller_route(seller_id, "/connect/login"),
    )


def connect_update(
    *,
    auto_payout: bool | NotGiven = NOT_GIVEN,
    auto_payout_minimum: Amount | NotGiven | None = NOT_GIVEN,
    seller_id: str | None = None,
) -> RequestSpec[ConnectAccount]:
    """``PATCH /sellers/me/connect``: only the fields given are sent;
    ``auto_payout_minimum=None`` is sent as ``null`` (back to the server's default)."""
    if not isinstance(auto_payout, NotGiven) and not isinstance(auto_payout, bool):
        raise ValueError(f"auto_payout must be True or False, got {auto_payout!r}")
    minimum = auto_payout_minimum
    body = to_json(
        UpdateConnect(
            auto_payout=None if isinstance(auto_payout, NotGiven) else auto_payout,
            auto_payout_minimum=(
                None
                if minimum is None or isinstance(minimum, NotGiven)
                else parse_amount(_limit("auto_payout_minimum", minimum))
            ),
        )
    )
    if minimum is None:  # to_json dropped it: null is "the server's default", on purpose
        body["auto_payout_minimum"] = None
    if not body:
        raise ValueError("update needs auto_payout=... or auto_payout_minimum=...")
    return RequestSpec(
        method="PATCH",
        json=body,
        keep_null=True,
        parse=as_model(ConnectAccount),
        **_seller_route(seller_id, "/connect"),
    )


def withdrawals_create(
    amount: Amount | None = None, *, seller_id: str | None = None
) -> RequestSpec[Withdrawal]:
    """``POST /sellers/me/withdraw``: ``amount``, or the whole available balance."""
    return RequestSpec(
        method="POST",
        json=to_json(Withdraw(amount=None if amount is None else _positive(amount))),
        parse=as_model(Withdrawal),
        **_seller_route(seller_id, "/withdraw"),
    )


def withdrawals_list(
    *, limit: int | None = None, starting_after: str | None = None, seller_id: str | None = None
) -> RequestSpec[WithdrawalList]:
    """``GET /sellers/me/withdrawals``: newest first."""
    return RequestSpec(
        method="GET",
        query=_page(limit, starting_after),
        parse=as_model(WithdrawalList),
        **_seller_route(seller_id, "/withdrawals"),
    )


def withdrawals_get(withdrawal_id: str, *, seller_id: str | None = None) -> RequestSpec[Withdrawal]:
    """``GET /sellers/me/withdrawals/{withdrawal_id}``: one withdrawal and its status."""
    route = _seller_route(seller_id, "/withdrawals/{withdrawal_id}")
    route["path_params"] = {**route.get("path_params", {}), "withdrawal_id": withdrawal_id}
    return RequestSpec(method="GET", parse=as_model(Withdrawal), **route)


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
    method: ResourceMethod | None = None,
    body_hint: Mapping[str, Any] | None = None,
) -> RequestSpec[Resource]:
    """``POST /resources``; ``method`` left out sells any method, ``body_hint`` (a JSON
    object for callers to copy) goes with POST, PUT or PATCH only."""
    return RequestSpec(
        method="POST",
        path="/resources",
        role=Role.SELLER,
        json={
            "kind": kind,
            "path": path,
            "tool": tool,
            "amount": _amount(amount),
            "description": description,
            "metadata": None if metadata is None else _metadata(metadata),
            "upstream_url": upstream_url,
            "listed": listed,
            "method": method,
            "body_hint": None if body_hint is None else dict(body_hint),
        },
        parse=as_model(Resource),
    )


def resources_list(
    *, limit: int | None = None, starting_after: str | None = None, seller_id: str | None = None
) -> RequestSpec[ResourceList]:
    """``GET /resources``: oldest first, inactive ones included; with ``seller_id`` the
    owner dashboard's ``GET /sellers/{seller_id}/resources``."""
    route: dict[str, Any] = {"path": "/resources", "role": Role.SELLER}
    if seller_id is not None:
        route = _seller_route(seller_id, "/resources")
    return RequestSpec(
        method="GET", query=_page(limit, starting_after), parse=as_model(ResourceList), **route
    )


def resources_get(resource_id: str) -> RequestSpec[Resource]:
    return RequestSpec(
        method="GET",
        path="/resources/{id}",
        path_params={"id": resource_id},
        role=Role.SELLER,
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
    method: ResourceMethod | NotGiven | None = NOT_GIVEN,
    body_hint: Mapping[str, Any] | NotGiven | None = NOT_GIVEN,
) -> RequestSpec[Resource]:
    """``PATCH /resources/:id``: ``None`` leaves a field as it is, except ``method`` and
    ``body_hint``, where ``None`` clears (any method; no hint) and leaving them out keeps
    them."""
    given = {
        "path": path,
        "tool": tool,
        "amount": None if amount is None else _amount(amount),
        "description": description,
        "metadata": None if metadata is None else _metadata(metadata),
        "upstream_url": upstream_url,
        "listed": listed,
        "active": active,
    }
    body: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    if not isinstance(method, NotGiven):
        body["method"] = method
    if not isinstance(body_hint, NotGiven):
        body["body_hint"] = None if body_hint is None else dict(body_hint)
    return RequestSpec(
        method="PATCH",
        path="/resources/{id}",
        path_params={"id": resource_id},
        role=Role.SELLER,
        json=body,
        keep_null=True,
        parse=as_model(Resource),
    )


def directory_list(
    *,
    limit: int | None = None,
    starting_after: str | None = None,
    kind: ResourceKind | None = None,
    q: str | None = None,
    max_amount: Amount | None = None,
) -> RequestSpec[DirectoryList]:
    """``GET /directory`` (no credential; the client's environment): listed resources,
    oldest first, optionally of one ``kind``, whose description contains ``q``, priced at
    most ``max_amount``."""
    query = dict(_page(limit, starting_after) or {})
    if kind is not None:
        query["kind"] = kind
    if q is not None:
        query["q"] = q
    if max_amount is not None:
        query["max_amount"] = _amount(max_amount, "max_amount")
    return RequestSpec(
        method="GET",
        path="/directory",
        query=query or None,
        parse=as_model(DirectoryList),
    )


def resources_deactivate(resource_id: str) -> RequestSpec[Resource]:
    return RequestSpec(
        method="POST",
        path="/resources/{id}/deactivate",
        path_params={"id": resource_id},
        role=Role.SELLER,
        json={},
        parse=as_model(Resource),
    )


# --- wallet keys (owner) --------------------------------------------------------------------


def wallet_keys_create(
    name: str | None = None,
    *,
    allowance: Amount | None = None,
    max_per_tx: Amount | None = None,
    budget: Amount | None = None,
    period: Period | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_rails: Sequence[str] | None = None,
) -> RequestSpec[WalletKeyCreated]:
    policy = _policy(
        allowance=_given(allowance),
        max_per_tx=_given(max_per_tx),
        budget=_given(budget),
        period=_given(period),
        allowed_hosts=_given(allowed_hosts),
        allowed_rails=_given(allowed_rails),
    )
    return RequestSpec(
        method="POST",
        path="/wallet-keys",
        role=Role.OWNER,
        # The policy goes in as built (see _policy), after to_json has dropped None.
        json={**to_json(CreateWalletKey(name=name)), "policy": policy},
        parse=as_model(WalletKeyCreated),
    )


def wallet_keys_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[WalletKeyList]:
    """``GET /wallet-keys``: oldest first, revoked ones included."""
    return RequestSpec(
        method="GET",
        path="/wallet-keys",
        role=Role.OWNER,
        query=_page(limit, starting_after),
        parse=as_model(WalletKeyList),
    )


def wallet_keys_get(wallet_key_id: str) -> RequestSpec[WalletKey]:
    return RequestSpec(
        method="GET",
        path="/wallet-keys/{id}",
        path_params={"id": wallet_key_id},
        role=Role.OWNER,
        parse=as_model(WalletKey),
    )


def wallet_keys_update(
    wallet_key_id: str,
    *,
    name: str | NotGiven = NOT_GIVEN,
    allowance: Amount | NotGiven | None = NOT_GIVEN,
    max_per_tx: Amount | NotGiven | None = NOT_GIVEN,
    budget: Amount | NotGiven | None = NOT_GIVEN,
    period: Period | NotGiven = NOT_GIVEN,
    allowed_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN,
    allowed_rails: Sequence[str] | NotGiven | None = NOT_GIVEN,
) -> RequestSpec[WalletKey]:
    body = to_json(
        UpdateWalletKey(name=None if isinstance(name, NotGiven) else _text("name", name))
    )
    policy = _policy(
        allowance=allowance,
        max_per_tx=max_per_tx,
        budget=budget,
        period=period,
        allowed_hosts=allowed_hosts,
        allowed_rails=allowed_rails,
    )
    if policy:
        body["policy"] = policy
    if not body:
        raise ValueError("update needs at least one field to change")
    return RequestSpec(
        method="PATCH",
        path="/wallet-keys/{id}",
        path_params={"id": wallet_key_id},
        role=Role.OWNER,
        json=body,
        parse=as_model(WalletKey),
    )


def _wallet_key_action(
    wallet_key_id: str, action: str, body: Mapping[str, Any]
) -> RequestSpec[WalletKey]:
    return RequestSpec(
        method="POST",
        path="/wallet-keys/{id}/" + action,
        path_params={"id": wallet_key_id},
        role=Role.OWNER,
        json=body,
        parse=as_model(WalletKey),
    )


def _funds(amount: Amount) -> dict[str, Any]:
    return to_json(WalletKeyAmount(amount=parse_amount(_amount(amount))))


def wallet_keys_fund(wallet_key_id: str, amount: Amount) -> RequestSpec[WalletKey]:
    return _wallet_key_action(wallet_key_id, "fund", _funds(amount))


def wallet_keys_refund(wallet_key_id: str, amount: Amount) -> RequestSpec[WalletKey]:
    return _wallet_key_action(wallet_key_id, "refund", _funds(amount))


def wallet_keys_revoke(wallet_key_id: str) -> RequestSpec[WalletKey]:
    return _wallet_key_action(wallet_key_id, "revoke", {})


# --- top-ups (owner) -----------------------------------------------------------------------


def top_ups_create(amount: Amount, *, method: str | None = None) -> RequestSpec[TopUp]:
    """``POST /owners/me/top-ups``: 402 with the challenge until paid, then the top-up;
    ``method="card"``: a pending top-up with the processor's ``checkout_url``."""
    body = _funds(amount)
    if method is not None:
        body["method"] = method
    return RequestSpec(
        method="POST",
        path="/owners/me/top-ups",
        role=Role.OWNER,
        json=body,
        parse=as_model(TopUp),
    )


def top_ups_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[TopUpList]:
    """``GET /owners/me/top-ups``: newest first."""
    return RequestSpec(
        method="GET",
        path="/owners/me/top-ups",
        role=Role.OWNER,
        query=_page(limit, starting_after),
        parse=as_model(TopUpList),
    )


def top_ups_get(top_up_id: str) -> RequestSpec[TopUp]:
    return RequestSpec(
        method="GET",
        path="/owners/me/top-ups/{id}",
        path_params={"id": top_up_id},
        role=Role.OWNER,
        parse=as_model(TopUp),
    )


# --- spend and pay (wallet key) -------------------------------------------------------------


def spend_balance() -> RequestSpec[SpendBalance]:
    return RequestSpec(
        method="GET", path="/spend/balance", role=Role.WALLET, parse=as_model(SpendBalance)
    )


def pay(
    *,
    resource_id: str | None = None,
    destination: str | None = None,
    amount: Amount | None = None,
) -> RequestSpec[PayResult]:
    """``POST /pay``: a resource (``resource_id``) or a transfer (``destination``, ``amount``).

    Exactly one of the two forms; anything else is a ``ValueError`` before sending.
    """
    body: Pay
    if resource_id is not None:
        if destination is not None or amount is not None:
            raise ValueError(
                "pay takes resource_id=... alone (the resource sets the price), or "
                "destination=... with amount=..., not both"
            )
        body = Pay(resource_id=_text("resource_id", resource_id))
    elif destination is not None:
        if amount is None:
            raise ValueError("a transfer to destination=... needs amount=...")
        body = Pay(destination=_text("destination", destination), amount=_positive(amount))
    else:
        raise ValueError(
            "pay needs resource_id=... (pay a resource) or destination=... and amount=... "
            "(transfer to a handle)"
        )
    return RequestSpec(
        method="POST",
        path="/pay",
        role=Role.WALLET,
        json=to_json(body),
        parse=as_model(PayResult),
    )


def spend_pay_url(
    url: str, *, method: PayUrlMethod = "GET", json: Any = None
) -> RequestSpec[PayUrlResult]:
    """``POST /spend/pay-url``: the service pays the URL's 402 and returns its answer.

    ``json`` is the JSON body sent to the URL (``POST`` only); ``None`` sends none.
    """
    return RequestSpec(
        method="POST",
        path="/spend/pay-url",
        role=Role.WALLET,
        json=to_json(_pay_url_body(url, method, json)),
        parse=as_model(PayUrlResult),
    )


def _pay_url_body(url: str, method: str, json: Any, *, dry_run: bool | None = None) -> PayUrl:
    if method not in PAY_URL_METHODS:
        raise ValueError(f"method must be one of {PAY_URL_METHODS}, got {method!r}")
    if json is not None and method != "POST":
        raise ValueError("a JSON body (json=...) is sent with method='POST' only")
    verb: PayUrlMethod = "POST" if method == "POST" else "GET"
    return PayUrl(url=_text("url", url), method=verb, json=json, dry_run=dry_run)


def spend_pay_url_quote(
    url: str, *, method: PayUrlMethod = "GET", json: Any = None
) -> RequestSpec[PayUrlQuote]:
    """``POST /spend/pay-url`` with ``dry_run``: what paying the URL would do; nothing paid."""
    return RequestSpec(
        method="POST",
        path="/spend/pay-url",
        role=Role.WALLET,
        json=to_json(_pay_url_body(url, method, json, dry_run=True)),
        parse=as_model(PayUrlQuote),
    )


def spend_attempts(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[SpendAttemptList]:
    """``GET /spend/attempts``: newest first."""
    return RequestSpec(
        method="GET",
        path="/spend/attempts",
        role=Role.WALLET,
        query=_page(limit, starting_after),
        parse=as_model(SpendAttemptList),
    )


# --- handles --------------------------------------------------------------------------------


def handles_create(handle: str) -> RequestSpec[Handle]:
    if _text("handle", handle) == "@":
        raise ValueError("handle must have a name after '@'")
    return RequestSpec(
        method="POST",
        path="/handles",
        role=Role.OWNER,
        json=to_json(ClaimHandle(handle=handle)),
        parse=as_model(Handle),
    )


def handles_resolve(destination: str) -> RequestSpec[HandleResolution]:
    return RequestSpec(
        method="GET",
        path="/handles/resolve/{destination}",
        path_params={"destination": destination},
        role=Role.WALLET,
        parse=as_model(HandleResolution),
    )


# --- receipts -------------------------------------------------------------------------------


def access_verify(
    receipt_id: str, resource_id: str | None = None
) -> RequestSpec[ReceiptVerification]:
    """``POST /access/verify``: public; the seller key goes along when the client has one."""
    return RequestSpec(
        method="POST",
        path="/access/verify",
        role=Role.SELLER,
        role_optional=True,
        json=to_json(
            VerifyReceipt(
                receipt_id=_text("receipt_id", receipt_id),
                resource_id=None if resource_id is None else _text("resource_id", resource_id),
            )
        ),
        parse=as_model(ReceiptVerification),
    )


# --- open rails at a seller's own gate (seller key) -----------------------------------------


def _absolute_url(value: object) -> str:
    url = _text("url", value)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
        raise ValueError(f"url must be an absolute http(s) URL, got {url!r}")
    return url


def _method(value: object) -> str:
    method = _text("method", value)
    if not method.isascii() or not method.isalpha() or len(method) > 16:
        raise ValueError(f"method must be an HTTP method such as 'GET', got {method!r}")
    return method.upper()


def gates_challenge(resource_id: str, *, method: str, url: str) -> RequestSpec[GateChallenge]:
    """``POST /gates/challenge``: the x402 / MPP challenge headers for an unpaid request
    to ``url`` (absolute, as the client addressed it) with ``method``."""
    return RequestSpec(
        method="POST",
        path="/gates/challenge",
        role=Role.SELLER,
        json=to_json(
            RequestChallenge(
                resource_id=_text("resource_id", resource_id),
                method=_method(method),
                url=_absolute_url(url),
            )
        ),
        parse=as_model(GateChallenge),
    )


def gates_redeem(
    resource_id: str, *, method: str, url: str, headers: Mapping[str, str]
) -> RequestSpec[GateRedemption]:
    """``POST /gates/redeem``: verify the open-rail credential in ``headers`` and claim it
    (nothing moves yet): the answer's ``claim`` is then settled (:func:`gates_settle`) once
    the request's answer succeeded, or released (:func:`gates_release`).

    Only ``PAYMENT-SIGNATURE`` (x402) and ``Authorization`` (MPP's ``Payment`` scheme) are
    sent: any other header, and an ``Authorization`` of another scheme (the app's own
    login), stays with the seller's app.
    """
    credentials = rail_credentials(headers)
    if not credentials:
        raise ValueError("headers hold no PAYMENT-SIGNATURE or 'Authorization: Payment' credential")
    return RequestSpec(
        method="POST",
        path="/gates/redeem",
        role=Role.SELLER,
        json=to_json(
            RedeemCredential(
                resource_id=_text("resource_id", resource_id),
                method=_method(method),
                url=_absolute_url(url),
                headers=dict(credentials),
            )
        ),
        parse=as_model(GateRedemption),
    )


def gates_settle(claim: str) -> RequestSpec[GateRedemption]:
    """``POST /gates/settle``: settle a claimed credential whose answer succeeded."""
    return RequestSpec(
        method="POST",
        path="/gates/settle",
        role=Role.SELLER,
        json=to_json(SettleClaim(claim=_text("claim", claim))),
        parse=as_model(GateRedemption),
    )


def gates_release(
    claim: str, *, status: int | None = None, reason: str = "answer_failed"
) -> RequestSpec[GateRelease]:
    """``POST /gates/release``: release a claimed credential whose answer failed
    (``status``) or never came (``reason="answer_missing"``); nothing is charged."""
    if reason not in ("answer_failed", "answer_missing"):
        raise ValueError('reason must be "answer_failed" or "answer_missing"')
    return RequestSpec(
        method="POST",
        path="/gates/release",
        role=Role.SELLER,
        json=to_json(
            ReleaseClaim(
                claim=_text("claim", claim),
                reason=reason,  # type: ignore[arg-type]
                status=status,
            )
        ),
        parse=as_model(GateRelease),
    )


# --- webhook endpoints (owner) --------------------------------------------------------------


def _events(value: Sequence[str] | None) -> list[str] | None:
    """An endpoint's event allowlist; ``None`` is every event, including future ones."""
    if value is None:
        return None
    names = _names("events", value)
    if not names:
        raise ValueError(
            "events must name at least one event type; pass None to receive every event"
        )
    return names


def webhooks_create(
    url: str, *, events: Sequence[str] | None = None, description: str | None = None
) -> RequestSpec[WebhookEndpointCreated]:
    if description is not None and not isinstance(description, str):
        raise ValueError(f"description must be a string, got {description!r}")
    return RequestSpec(
        method="POST",
        path="/webhooks",
        role=Role.OWNER,
        json=to_json(
            CreateWebhook(url=_text("url", url), events=_events(events), description=description)
        ),
        parse=as_model(WebhookEndpointCreated),
    )


def webhooks_list(
    *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[WebhookEndpointList]:
    """``GET /webhooks``: oldest first, deleted ones left out."""
    return RequestSpec(
        method="GET",
        path="/webhooks",
        role=Role.OWNER,
        query=_page(limit, starting_after),
        parse=as_model(WebhookEndpointList),
    )


def webhooks_events() -> RequestSpec[EventCatalog]:
    return RequestSpec(
        method="GET", path="/webhooks/events", role=Role.OWNER, parse=as_model(EventCatalog)
    )


def webhooks_update(
    webhook_id: str,
    *,
    events: Sequence[str] | NotGiven | None = NOT_GIVEN,
    description: str | NotGiven = NOT_GIVEN,
    status: WebhookStatus | NotGiven = NOT_GIVEN,
) -> RequestSpec[WebhookEndpoint]:
    """Only the fields given are sent; ``events=None`` is sent as ``null`` (all events)."""
    new_events = None if isinstance(events, NotGiven) else _events(events)
    if not isinstance(description, NotGiven) and not isinstance(description, str):
        raise ValueError(f"description must be a string ('' clears it), got {description!r}")
    if not isinstance(status, NotGiven) and status not in WEBHOOK_STATUSES:
        raise ValueError(f"status must be one of {WEBHOOK_STATUSES}, got {status!r}")
    body = to_json(
        UpdateWebhook(
            events=new_events,
            description=None if isinstance(description, NotGiven) else description,
            status=None if isinstance(status, NotGiven) else status,
        )
    )
    if events is None:  # to_json dropped it: null is "every event", sent on purpose
        body = {"events": None, **body}
    if not body:
        raise ValueError("update needs at least one field to change")
    return RequestSpec(
        method="PATCH",
        path="/webhooks/{id}",
        path_params={"id": webhook_id},
        role=Role.OWNER,
        json=body,
        keep_null=True,
        parse=as_model(WebhookEndpoint),
    )


def webhooks_delete(webhook_id: str) -> RequestSpec[WebhookEndpoint]:
    return RequestSpec(
        method="DELETE",
        path="/webhooks/{id}",
        path_params={"id": webhook_id},
        role=Role.OWNER,
        parse=as_model(WebhookEndpoint),
    )


def webhooks_deliveries(
    webhook_id: str, *, limit: int | None = None, starting_after: str | None = None
) -> RequestSpec[DeliveryList]:
    """``GET /webhooks/:id/deliveries``: newest first."""
    return RequestSpec(
        method="GET",
        path="/webhooks/{id}/deliveries",
        path_params={"id": webhook_id},
        role=Role.OWNER,
        query=_page(limit, starting_after),
        parse=as_model(DeliveryList),
    )


def webhooks_test(webhook_id: str) -> RequestSpec[Delivery]:
    return RequestSpec(
        method="POST",
        path="/webhooks/{id}/test",
        path_params={"id": webhook_id},
        role=Role.OWNER,
        json={},
        parse=as_model(Delivery),
    )


def webhooks_retry(webhook_id: str, delivery_id: str) -> RequestSpec[Delivery]:
    return RequestSpec(
        method="POST",
        path="/webhooks/{id}/deliveries/{delivery_id}/retry",
        path_params={"id": webhook_id, "delivery_id": delivery_id},
        role=Role.OWNER,
        json={},
        parse=as_model(Delivery),
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

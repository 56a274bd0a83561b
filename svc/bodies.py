"""``svc.bodies``: what each route takes, one attrs class per request body.

The reference server reads every body by these classes (unknown fields refused, every
problem listed in one 422), the OpenAPI document describes them, and the SDK builds the
bodies it sends from them (:func:`to_json`).  Markers beside the types say what a type
cannot (:mod:`svc.schema`).  A field without a default is required; an optional field
left out or sent as ``null`` means "not given", except where a route documents ``null`` as
"clear this".

``EXAMPLE`` on a class is the example the OpenAPI document shows.

A rule across fields (``Pay``: a resource alone, or a destination with an amount) is
written once, on its class, and raises :class:`BodyRuleError` when the body is built: the
SDK raises it before sending, and the server (which builds every body it reads) answers
its ``errors`` in the 422.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal

import attrs

from ._models import EVENT_DATA_TYPES
from .schema import Items, JsonObject, Text, Url
from .wire import unstructure

#: A path a seller's gate sells: starts with ``/``, no spaces, query or fragment.
HTTP_PATH = r"^/[^\s?#]{0,2047}$"
#: An MCP tool name.
TOOL_NAME = r"^[A-Za-z0-9_.\-/]{1,128}$"

_METADATA = JsonObject(
    max_bytes=8 * 1024,
    properties={
        "sku_kind": {"type": "string", "enum": ["one_shot", "credit_topup"]},
        "credits": {"type": "number", "exclusiveMinimum": 0},
        "credit_unit": {"type": "string", "maxLength": 64},
    },
)


class BodyRuleError(ValueError):
    """Fields of a body that disagree.  ``str()`` says it to a Python caller; ``errors``
    (``{"field", "message"}`` each) are what the server's 422 lists."""

    def __init__(self, sentence: str, *errors: tuple[str, str]) -> None:
        super().__init__(sentence)
        self.errors = [{"field": field, "message": message} for field, message in errors]


def to_json(body: Any) -> dict[str, Any]:
    """A body as the JSON object sent: fields not given (``None``) are left out."""
    return {k: v for k, v in unstructure(body).items() if v is not None}


# --- payouts -----------------------------------------------------------------------------

#: A country as ISO 3166-1 alpha-2.
COUNTRY = r"^[A-Za-z]{2}$"
#: The payout account's kind at the processor (``express`` when left out).
ConnectType = Literal["express", "standard"]


@attrs.frozen(kw_only=True)
class ConnectOnboard:
    """Open the seller's payout account (first call) and get a fresh onboarding link for a
    human; ``type`` is the processor's account kind (``express`` by default)."""

    country: Annotated[
        str, Text(max_length=2, pattern=COUNTRY, hint="a two-letter country code, e.g. US")
    ]
    type: ConnectType | None = attrs.field(
        default=None, metadata={"doc": "The kind of payout account; express when left out."}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"country": "US", "type": "express"}


@attrs.frozen(kw_only=True)
class UpdateConnect:
    """Auto payout for this seller: on or off, and the balance it waits for
    (``auto_payout_minimum: null`` = the server's default)."""

    #: An update must name at least one field (the schema's ``minProperties``).
    NAMES_A_CHANGE: ClassVar[bool] = True

    auto_payout: bool | None = None
    auto_payout_minimum: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"auto_payout": True, "auto_payout_minimum": "50.00"}


@attrs.frozen(kw_only=True)
class Withdraw:
    """How much to withdraw; left out, the whole available balance."""

    amount: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "25.00"}


# --- resources ----------------------------------------------------------------------------

#: The methods a resource can be sold for (left out: any method).
ResourceMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
#: What a resource sells: an HTTP path or an MCP tool.
ResourceKind = Literal["http", "mcp"]
#: The methods that carry a request body, the only ones a ``body_hint`` goes with.
BODY_METHODS = ("POST", "PUT", "PATCH")
#: The most a ``body_hint`` holds, as JSON.
BODY_HINT_MAX_BYTES = 4096
_BODY_HINT = JsonObject(max_bytes=BODY_HINT_MAX_BYTES)
_METHOD_DOC = (
    "The one HTTP method the hosted gate sells (another is answered 405 with Allow); "
    "left out, any method."
)
_BODY_HINT_DOC = (
    "A JSON object (at most 4096 bytes) callers copy with their own values as the body they "
    "send; only with method POST, PUT or PATCH.  Shown in GET /directory."
)

_DESCRIPTION = "What the buyer gets, in words."
_UPSTREAM_URL = {"doc": "Where a hosted gate forwards a paid call."}
_PATH = Text(max_length=2048, pattern=HTTP_PATH, hint="a path starting with /")
_TOOL = Text(max_length=128, pattern=TOOL_NAME, hint="an MCP tool name")


#: How a resource is priced: one ``amount``, or by use (``metered``).
ResourcePricing = Literal["fixed", "metered"]
_UNIT = Text(
    max_length=32,
    pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$",
    hint="a unit name like token, result or byte",
)
_PRICING_DOC = {
    "doc": "fixed (the default: amount is the price) or metered: the payer authorises "
    "max_amount and is charged the units the answer used times unit_price, at most "
    "max_amount, once it was delivered."
}
_UNIT_PRICE_DOC = {"doc": "Metered: the price of one unit (at least 0.000001)."}
_MAX_AMOUNT_DOC = {"doc": "Metered: the most one payment costs (what the payer authorises)."}
_FALLBACK_DOC = {
    "doc": "Metered: the fixed price offered where a rail cannot meter (MPP's charge, the "
    "buy page); left out, those rails do not sell the resource."
}


@attrs.frozen(kw_only=True)
class CreateResource:
    """A priced HTTP path (``kind: http`` with ``path``) or MCP tool (``kind: mcp`` with
    ``tool``), at a fixed ``amount`` or metered (``pricing``, ``unit_price``, ``unit``,
    ``max_amount``)."""

    kind: ResourceKind
    amount: Decimal | None = attrs.field(
        default=None, metadata={"doc": "The price (fixed pricing, required there)."}
    )
    pricing: ResourcePricing | None = attrs.field(default=None, metadata=_PRICING_DOC)
    unit_price: Decimal | None = attrs.field(default=None, metadata=_UNIT_PRICE_DOC)
    unit: Annotated[str | None, _UNIT] = None
    max_amount: Decimal | None = attrs.field(default=None, metadata=_MAX_AMOUNT_DOC)
    fallback_amount: Decimal | None = attrs.field(default=None, metadata=_FALLBACK_DOC)
    path: Annotated[str | None, _PATH] = None
    tool: Annotated[str | None, _TOOL] = None
    description: Annotated[str | None, Text(max_length=1000)] = attrs.field(
        default=None, metadata={"doc": _DESCRIPTION}
    )
    metadata: Annotated[dict[str, Any] | None, _METADATA] = None
    upstream_url: Annotated[str | None, Url()] = attrs.field(default=None, metadata=_UPSTREAM_URL)
    listed: bool | None = attrs.field(
        default=None, metadata={"doc": "Shown in GET /directory when true (default false)."}
    )
    method: ResourceMethod | None = attrs.field(default=None, metadata={"doc": _METHOD_DOC})
    body_hint: Annotated[dict[str, Any] | None, _BODY_HINT] = attrs.field(
        default=None, metadata={"doc": _BODY_HINT_DOC}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "kind": "http",
        "path": "/v1/forecast",
        "amount": "0.05",
        "description": "A 7-day forecast",
        "method": "POST",
        "body_hint": {"city": "Lisbon", "days": 7},
        "listed": True,
    }


@attrs.frozen(kw_only=True)
class UpdateResource:
    """The fields to change; fields left out keep their values (``null`` clears
    ``method`` and ``body_hint``)."""

    #: An update must name at least one field (the schema's ``minProperties``).
    NAMES_A_CHANGE: ClassVar[bool] = True

    path: Annotated[str | None, _PATH] = None
    tool: Annotated[str | None, _TOOL] = None
    amount: Decimal | None = None
    unit_price: Decimal | None = attrs.field(default=None, metadata=_UNIT_PRICE_DOC)
    unit: Annotated[str | None, _UNIT] = None
    max_amount: Decimal | None = attrs.field(default=None, metadata=_MAX_AMOUNT_DOC)
    fallback_amount: Decimal | None = attrs.field(default=None, metadata=_FALLBACK_DOC)
    description: Annotated[str | None, Text(max_length=1000)] = attrs.field(
        default=None, metadata={"doc": _DESCRIPTION}
    )
    metadata: Annotated[dict[str, Any] | None, _METADATA] = None
    upstream_url: Annotated[str | None, Url()] = attrs.field(default=None, metadata=_UPSTREAM_URL)
    listed: bool | None = None
    active: bool | None = None
    method: ResourceMethod | None = attrs.field(
        default=None, metadata={"doc": _METHOD_DOC + "  null: back to any method."}
    )
    body_hint: Annotated[dict[str, Any] | None, _BODY_HINT] = attrs.field(
        default=None, metadata={"doc": _BODY_HINT_DOC + "  null clears it."}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "0.10"}


# --- owners and sellers -------------------------------------------------------------------

#: The label of a seller or a wallet key.
_NAME = Text(max_length=200)
_NAME_DOC = {"doc": "A name to tell it by."}

#: An email address, as sign-up takes it (stored lowercased).
EMAIL = r"^[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s]{2,63}$"
#: An EVM address: ``0x`` and 40 hex digits.  Mixed case is an EIP-55 checksum, which the
#: server checks too (a pattern cannot say it).
EVM_ADDRESS = r"^0x[0-9a-fA-F]{40}$"


@attrs.frozen(kw_only=True)
class CreateOwner:
    """Sign up: one owner per email address; the answer carries the owner's JWT."""

    email: Annotated[str, Text(max_length=320, pattern=EMAIL, hint="an email address")]

    EXAMPLE: ClassVar[dict[str, Any]] = {"email": "dev@example.com"}


@attrs.frozen(kw_only=True)
class CreateSeller:
    """A seller in the request's environment; ``name`` is a label of your own."""

    name: Annotated[str | None, _NAME] = attrs.field(default=None, metadata=_NAME_DOC)

    EXAMPLE: ClassVar[dict[str, Any]] = {"name": "Weather API"}


@attrs.frozen(kw_only=True)
class EnablePayments:
    """Turn on MPP and x402 for every gate of the seller; optionally set the processor
    profile and the wallet payouts go to."""

    processor_profile_id: Annotated[str | None, Text(max_length=200)] = attrs.field(
        default=None, metadata={"doc": "The seller's profile at the processor."}
    )
    payout_wallet_address: Annotated[
        str | None,
        Text(
            max_length=42,
            pattern=EVM_ADDRESS,
            hint="an EVM address (0x followed by 40 hex digits)",
        ),
    ] = attrs.field(
        default=None,
        metadata={
            "doc": "Where payouts go (mixed case must be a valid EIP-55 checksum); "
            "null clears it: payouts go back to the processor's deposit."
        },
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "payout_wallet_address": "0x52908400098527886E0F7030069857D2E4169EE7"
    }


@attrs.frozen(kw_only=True)
class RecycleBalance:
    """Move seller balance into the owner's account wallet: all of it, or ``amount``."""

    amount: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "5.00"}


# --- handles ------------------------------------------------------------------------------

#: A handle as sent: 3 to 30 letters, digits, ``_`` or ``-`` starting with a letter or
#: digit, optionally after ``@``; case and surrounding spaces are ignored.
HANDLE = r"^\s*@?[A-Za-z0-9][A-Za-z0-9_-]{2,29}\s*$"


@attrs.frozen(kw_only=True)
class ClaimHandle:
    """Claim an ``@name`` in the request's environment; transfers to it land in the
    owner's account wallet."""

    handle: Annotated[
        str,
        Text(
            max_length=31,
            pattern=HANDLE,
            hint="3-30 lowercase letters, digits, _ or -, optionally after @",
        ),
    ]

    EXAMPLE: ClassVar[dict[str, Any]] = {"handle": "@weather-bot"}


# --- spend --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Pay:
    """Pay an in-service resource (``resource_id`` alone: its price is paid) or transfer
    to a handle (``destination`` and ``amount``); exactly one of the two."""

    resource_id: Annotated[str | None, Text(max_length=40)] = None
    destination: Annotated[str | None, Text(max_length=31)] = attrs.field(
        default=None, metadata={"doc": "A handle such as @acme."}
    )
    amount: Decimal | None = attrs.field(
        default=None, metadata={"doc": "With destination only: a resource is paid its price."}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"destination": "@weather-bot", "amount": "0.25"}

    def __attrs_post_init__(self) -> None:
        either = ("body", "needs either resource_id, or destination and amount")
        if self.resource_id is not None:
            errors = [either] if self.destination is not None else []
            if self.amount is not None:
                errors.append(("amount", "is the resource's price; send resource_id alone"))
            if errors:
                raise BodyRuleError(
                    "pay takes resource_id alone (the resource sets the price), or "
                    "destination with amount, not both",
                    *errors,
                )
        elif self.destination is None:
            raise BodyRuleError(
                "pay needs resource_id (pay a resource) or destination and amount "
                "(transfer to a handle)",
                either,
            )
        elif self.amount is None:
            raise BodyRuleError("a transfer to destination needs amount", ("amount", "is required"))


# --- access -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class VerifyReceipt:
    """A receipt to check, optionally for one resource (``resource_id``)."""

    receipt_id: Annotated[str, Text(max_length=100)]
    resource_id: Annotated[str | None, Text(max_length=40)] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"receipt_id": "rcpt_01HZX3", "resource_id": "res_01HZX3"}


# --- sandbox ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SandboxFaucet:
    """Sandbox USDC to mint to an EVM address (test only), up to the server's cap per
    call."""

    address: Annotated[
        str,
        Text(max_length=42, pattern=EVM_ADDRESS, hint="a 0x-prefixed 20-byte EVM address"),
    ] = attrs.field(metadata={"doc": "Mixed case must be a valid EIP-55 checksum."})
    amount: Decimal

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "address": "0x52908400098527886E0F7030069857D2E4169EE7",
        "amount": "10.00",
    }


# --- wallet keys --------------------------------------------------------------------------

#: A host a wallet key may pay (``allowed_hosts``): lowercase, ``*`` wildcards, a port.
HOST_NAME = r"^(?=.{1,253}$)[a-z0-9*]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$"
#: The rails a wallet key may pay on.
RAILS = ("x402", "mpp", "rill")
#: How often a wallet key's ``allowance`` resets; ``"none"``: it never does.
Period = Literal["day", "week", "month", "none"]


@attrs.frozen(kw_only=True)
class WalletKeyPolicy:
    """A wallet key's spend policy.  On create, a field left out (or ``null``) means no
    limit; on update, a field left out keeps its value and ``null`` clears it."""

    allowance: Decimal | None = attrs.field(
        default=None, metadata={"doc": "What may be spent per period."}
    )
    max_per_tx: Decimal | None = attrs.field(
        default=None, metadata={"doc": "The most one payment may cost."}
    )
    budget: Decimal | None = attrs.field(
        default=None, metadata={"doc": "The most the key may ever spend."}
    )
    period: Period | None = attrs.field(
        default=None, metadata={"doc": "When the allowance resets (none: never)."}
    )
    allowed_hosts: Annotated[
        list[str] | None, Items(max_items=50, pattern=HOST_NAME, hint="lowercase host names")
    ] = None
    allowed_rails: Annotated[
        list[str] | None, Items(max_items=3, choices=RAILS, hint="x402, mpp or rill")
    ] = None
    approval_above: Decimal | None = attrs.field(
        default=None,
        metadata={"doc": "A payment strictly above this waits for a person's approval."},
    )
    approval_hosts: Annotated[
        list[str] | None, Items(max_items=50, pattern=HOST_NAME, hint="lowercase host names")
    ] = None
    approval_ttl_seconds: int | None = attrs.field(
        default=None,
        metadata={"doc": "How long an approval waits, 60 to 86400 seconds (default 900)."},
    )


@attrs.frozen(kw_only=True)
class CreateWalletKey:
    """A new wallet key (``svc_vw_*``, shown once) and its spend policy."""

    name: Annotated[str | None, _NAME] = attrs.field(default=None, metadata=_NAME_DOC)
    policy: WalletKeyPolicy | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "name": "research agent",
        "policy": {"allowance": "5.00", "period": "day", "max_per_tx": "0.50"},
    }


@attrs.frozen(kw_only=True)
class UpdateWalletKey:
    """A new name, or policy changes: a field left out keeps its value, ``null`` in
    ``policy`` clears that limit."""

    #: An update must name at least one field (the schema's ``minProperties``).
    NAMES_A_CHANGE: ClassVar[bool] = True

    name: Annotated[str | None, _NAME] = attrs.field(default=None, metadata=_NAME_DOC)
    policy: WalletKeyPolicy | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"policy": {"budget": None, "max_per_tx": "1.00"}}


@attrs.frozen(kw_only=True)
class WalletKeyAmount:
    """The amount to move into the wallet key (fund) or back out of it (refund)."""

    amount: Decimal

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "10.00"}


@attrs.frozen(kw_only=True)
class CreateTopUp:
    """The amount to pay into the owner's account wallet, and how: ``crypto`` (the
    default: x402 or MPP from the owner's own wallet) or ``card`` (live with the
    processor: the answer is a pending top-up with the processor's ``checkout_url``)."""

    amount: Decimal
    method: Literal["crypto", "card"] | None = attrs.field(
        default=None,
        metadata={"doc": "crypto (default: x402 or MPP) or card (the processor's Checkout)."},
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "25.00"}


# --- webhooks -----------------------------------------------------------------------------

#: Every event type a webhook endpoint may subscribe to (``GET /webhooks/events``).
EVENT_TYPES = tuple(EVENT_DATA_TYPES)
#: What an owner may set a webhook endpoint to (``deleted`` is reached by deleting it).
WebhookStatus = Literal["enabled", "disabled"]
_EVENTS = Items(
    max_items=len(EVENT_TYPES),
    choices=EVENT_TYPES,
    hint="event types from GET /webhooks/events",
)


@attrs.frozen(kw_only=True)
class CreateWebhook:
    """A webhook endpoint: ``https`` (``http`` only for localhost outside production), no
    credentials in the URL, and no private address in production.  ``events`` left out or
    ``null``: every event, including future ones."""

    url: Annotated[str, Url(https="route")]
    events: Annotated[list[str] | None, _EVENTS] = None
    description: Annotated[str | None, Text(max_length=500)] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "url": "https://shop.example/hooks/svc",
        "events": ["payment.succeeded"],
    }


@attrs.frozen(kw_only=True)
class UpdateWebhook:
    """The fields to change; ``events: null`` subscribes to every event, ``status:
    enabled`` re-enables an endpoint disabled after failing."""

    #: An update must name at least one field (the schema's ``minProperties``).
    NAMES_A_CHANGE: ClassVar[bool] = True

    events: Annotated[list[str] | None, _EVENTS] = None
    description: Annotated[str | None, Text(max_length=500)] = None
    status: WebhookStatus | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"status": "enabled"}


@attrs.frozen(kw_only=True)
class CreateListener:
    """A listener endpoint (``svc listen``): deliveries wait for the listening CLI instead
    of being sent over HTTP.  ``events`` left out: every event."""

    events: Annotated[list[str] | None, _EVENTS] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"events": ["payment.succeeded"]}


@attrs.frozen(kw_only=True)
class AckListened:
    """What the local receiver answered to one listened delivery: its HTTP status, or
    the error that kept it from answering."""

    delivery_id: Annotated[str, Text(max_length=40)]
    status_code: int | None = None
    error: Annotated[str | None, Text(max_length=500)] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"delivery_id": "dlv_123", "status_code": 200}


# --- pay-url ------------------------------------------------------------------------------

#: How ``pay-url`` requests the URL; a POST-only 402 needs ``POST`` and a JSON body.
PayUrlMethod = Literal["GET", "POST"]


@attrs.frozen(kw_only=True)
class PayUrl:
    """A URL answering 402 to pay and request; ``json`` is the JSON body sent with
    ``method: POST`` (a GET sends none)."""

    url: Annotated[str, Url()]
    method: PayUrlMethod | None = attrs.field(
        default=None, metadata={"doc": "How the URL is requested; GET when left out."}
    )
    json: Any = attrs.field(
        default=None, metadata={"doc": "Any JSON value, sent as the body of a POST."}
    )
    dry_run: bool | None = attrs.field(
        default=None,
        metadata={
            "doc": "Probe only: answer the rail and price it would pay and whether the "
            "wallet key's policy allows it (a PayUrlQuote); nothing is paid, reserved or "
            "recorded."
        },
    )
    stream: bool | None = attrs.field(
        default=None,
        metadata={
            "doc": "Answer application/x-ndjson as the paid answer arrives: a head line, "
            "a chunk line (base64) per chunk, then the result line (or an error line); "
            "not with dry_run."
        },
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"url": "https://api.example/v1/report", "method": "GET"}

    def __attrs_post_init__(self) -> None:
        if self.json is not None and self.method != "POST":
            raise BodyRuleError(
                "a JSON body (json) is sent with method POST only",
                ("json", "is sent with method POST only (a GET has no body)"),
            )
        if self.stream and self.dry_run:
            raise BodyRuleError(
                "a dry run (dry_run) answers a quote, which is not streamed",
                ("stream", "cannot be combined with dry_run"),
            )


# --- gate rails ---------------------------------------------------------------------------

_GATE_METHOD = Text(max_length=16, pattern=r"^[A-Za-z]{1,16}$", hint="an HTTP method such as GET")
_GATE_URL = Text(max_length=4096)


@attrs.frozen(kw_only=True)
class RequestChallenge:
    """An unpaid request to the seller's own gate: the resource it sells, and the method
    and absolute URL (query included) the client addressed."""

    resource_id: Annotated[str, Text(max_length=40)]
    method: Annotated[str, _GATE_METHOD]
    url: Annotated[str, _GATE_URL]

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "resource_id": "res_123",
        "method": "GET",
        "url": "https://shop.example/v1/report?page=2",
    }


@attrs.frozen(kw_only=True)
class RedeemCredential:
    """An open-rail credential presented at the seller's own gate: the request it came
    with, and its ``PAYMENT-SIGNATURE`` (x402) and/or ``Authorization: Payment`` (MPP)
    header, nothing else."""

    resource_id: Annotated[str, Text(max_length=40)]
    method: Annotated[str, _GATE_METHOD]
    url: Annotated[str, _GATE_URL]
    headers: Annotated[
        dict[str, str],
        JsonObject(
            max_bytes=40 * 1024,
            properties={
                "PAYMENT-SIGNATURE": {"type": "string"},
                "Authorization": {"type": "string", "pattern": "^[Pp][Aa][Yy][Mm][Ee][Nn][Tt] "},
            },
        ),
    ]

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "resource_id": "res_123",
        "method": "GET",
        "url": "https://shop.example/v1/report?page=2",
        "headers": {"PAYMENT-SIGNATURE": "eyJ4..."},
    }


_CLAIM = Text(max_length=40, pattern=r"^clm_[A-Za-z0-9]{1,36}$", hint="a claim id (clm_…)")


@attrs.frozen(kw_only=True)
class SettleClaim:
    """A claimed credential (``POST /gates/redeem`` answered its ``claim``) whose answer
    succeeded: settle it."""

    claim: Annotated[str, _CLAIM]
    units: int | None = attrs.field(
        default=None,
        metadata={
            "doc": "Metered resources: the units the answer used; the payment settles "
            "units * unit_price, at most the authorised maximum (0 releases it).  Left out: "
            "the full price."
        },
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"claim": "clm_01JD3X7R9K2M4P6Q8S"}


@attrs.frozen(kw_only=True)
class CreateRefund:
    """Give back all or part of a payment the seller received."""

    receipt_id: str = attrs.field(metadata={"doc": "The payment's receipt."})
    amount: Decimal | None = attrs.field(
        default=None,
        metadata={"doc": "How much to give back; left out, all that is not refunded yet."},
    )
    reason: str | None = attrs.field(
        default=None, metadata={"doc": "Why, for the seller's and the payer's records."}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "receipt_id": "rcpt_01JD3X7R9K2M4P6Q8S",
        "amount": "0.05",
        "reason": "requested_by_customer",
    }


@attrs.frozen(kw_only=True)
class CaptureReceipt:
    """A metered ledger payment's answer was served: capture the units it used from the
    receipt's authorization (the rest of the maximum goes back to the payer)."""

    units: int = attrs.field(
        metadata={
            "doc": "The units the answer used; the payment settles units * unit_price, at "
            "most the authorised maximum (0 releases it: nothing is charged)."
        }
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"units": 137}


@attrs.frozen(kw_only=True)
class ReleaseClaim:
    """A claimed credential whose answer failed (``status``, at least 400) or never came:
    release it, charging nothing.  ``reason`` is recorded in ``payment.failed``."""

    claim: Annotated[str, _CLAIM]
    reason: Literal["answer_failed", "answer_missing"] = "answer_failed"
    status: int | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "claim": "clm_01JD3X7R9K2M4P6Q8S",
        "reason": "answer_failed",
        "status": 500,
    }

"""Typed shapes of everything the service sends back.

Classes are frozen attrs classes so they are cheap, hashable-by-identity values that type
checkers understand.  Fields a newer server adds are ignored when reading, and fields an
older server omits default to ``None``, so a client and a server of different versions
keep talking.  Enumerated values (``rail``, ``status``...) are plain strings for the same
reason: a new value must not make an old client fail to read a response.

The reference server builds its responses from these same classes (see
``reference_server``), which is how the two sides stay in agreement.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

import attrs

__all__ = [
    "AllowanceResetData",
    "Approval",
    "ApprovalDecidedData",
    "ApprovalList",
    "ApprovalRequestedData",
    "Balance",
    "Capabilities",
    "ConnectAccount",
    "ConnectLogin",
    "ConnectOnboarding",
    "DashboardLink",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryList",
    "DirectoryEntry",
    "DirectoryList",
    "ErrorBody",
    "ErrorDetail",
    "Event",
    "EventCatalog",
    "EventType",
    "FundingPaidData",
    "FundingRefundedData",
    "GateChallenge",
    "GateRedemption",
    "GateRelease",
    "Handle",
    "HandleResolution",
    "Health",
    "Jwks",
    "ListenBatch",
    "ListenedDelivery",
    "OwnerCreated",
    "PayResult",
    "PayUrlQuote",
    "PayUrlResult",
    "Payment",
    "PaymentFailedData",
    "PaymentRefundFailedData",
    "PaymentRefundedData",
    "PaymentSucceededData",
    "Receipt",
    "ReceiptVerification",
    "Recycled",
    "Refund",
    "RefundList",
    "Resource",
    "ResourceList",
    "ResourceMetadata",
    "ResourceUpdatedData",
    "Seller",
    "SellerCreated",
    "SellerList",
    "SellerWithdrawnData",
    "SpendAttempt",
    "SpendAttemptList",
    "SpendBalance",
    "TopUp",
    "TopUpList",
    "TransferReceivedData",
    "WalletKey",
    "WalletKeyCreated",
    "WalletKeyList",
    "WalletKeyRevokedData",
    "WalletPolicy",
    "WebhookEndpoint",
    "WebhookEndpointCreated",
    "WebhookEndpointList",
    "Withdrawal",
    "WithdrawalFailedData",
    "WithdrawalList",
    "WithdrawalPaidData",
]


# --- secrets ------------------------------------------------------------------------------

#: Prefixes that say what a credential is without giving any of it away.
_PUBLIC_PREFIX = re.compile(r"(svc_(sk|vw)_(test|live)_|whsec_)")


def _masked(value: object) -> str:
    """``repr`` of a secret: what kind it is and its last four characters, never the rest,
    so a logged or printed model (``print(created)``, a traceback's locals) leaks nothing
    usable while staying recognisable (``'svc_sk_test_…3f9a'``)."""
    if not isinstance(value, str) or len(value) < 16:
        return "'***'"
    prefix = _PUBLIC_PREFIX.match(value)
    return repr(f"{prefix.group(0) if prefix else ''}…{value[-4:]}")


def secret(default: Any = attrs.NOTHING) -> Any:
    """A field holding a credential: masked in ``repr``, whole on attribute access."""
    return attrs.field(default=default, repr=_masked, metadata={"secret": True})


# --- errors -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ErrorDetail:
    code: str
    message: str
    details: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ErrorBody:
    """The spec's error envelope: ``{"ok": false, "error": {...}, "request_id"}``."""

    error: ErrorDetail
    ok: bool = False
    request_id: str | None = None


# --- owners and sellers -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OwnerCreated:
    owner_id: str
    owner_jwt: str = secret()
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class DashboardLink:
    """A one-time link that signs the owner in to the dashboard (open it in a browser)."""

    url: str = secret()
    expires_at: datetime
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Seller:
    id: str
    environment: str
    mpp_enabled: bool = False
    x402_enabled: bool = False
    payouts_enabled: bool = False
    payout_wallet_address: str | None = None
    processor_profile_id: str | None = None
    balance: Decimal | None = None
    name: str | None = None
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class SellerCreated(Seller):
    """A new seller and its key; the key is never shown again."""

    seller_key: str = secret()


@attrs.frozen(kw_only=True)
class SellerList:
    data: list[Seller]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Balance:
    """``GET /sellers/me/balance``: money and the readiness flags to check before a withdraw."""

    seller_id: str
    environment: str
    balance: Decimal
    currency: str = "USD"
    payouts_enabled: bool = False
    mpp_enabled: bool = False
    x402_enabled: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Recycled:
    """``POST /sellers/:id/recycle``: seller balance moved into the owner's account wallet."""

    seller_id: str
    environment: str
    amount: Decimal
    seller_balance: Decimal
    account_wallet_balance: Decimal
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Withdrawal:
    """Seller balance on its way to the payout account: ``pending`` -> ``in_transit`` ->
    ``paid``, or ``failed`` (the amount is back in the balance; ``failure_reason`` says
    why)."""

    id: str
    status: str
    amount: Decimal | None = None
    currency: str = "USD"
    seller_id: str | None = None
    environment: str | None = None
    #: Started by auto payout rather than a withdraw call.
    automatic: bool = False
    failure_reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WithdrawalList:
    data: list[Withdrawal]
    has_more: bool = False
    request_id: str | None = None


# --- payouts (Connect) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ConnectAccount:
    """``GET /sellers/me/connect`` and ``POST /sellers/me/connect/sync``: the seller's
    payout account and its readiness flags.  ``status`` is ``not_started`` (no account
    yet), ``onboarding`` (a human has not finished the onboarding page, or something is
    due) or ``enabled`` (withdrawals and auto payout run)."""

    seller_id: str
    environment: str
    status: str
    payouts_enabled: bool = False
    details_submitted: bool = False
    #: What the account still needs before payouts are enabled.
    requirements_due: list[str] = attrs.field(factory=list)
    account_id: str | None = None
    type: str | None = None
    country: str | None = None
    #: Auto payout pays the whole available balance out once it reaches
    #: ``auto_payout_minimum`` (``None``: auto payout is off for this seller).
    auto_payout: bool = True
    auto_payout_minimum: Decimal | None = None
    #: When the flags were last read from the processor.
    synced_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ConnectOnboarding:
    """``POST /sellers/me/connect/onboard``: the page a human completes (hand it over;
    no API call completes onboarding).  It expires; ask again for a fresh one."""

    seller_id: str
    onboard_url: str
    expires_at: datetime | None = None
    account: ConnectAccount | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ConnectLogin:
    """``POST /sellers/me/connect/login``: the payout account's dashboard, for a human."""

    seller_id: str
    login_url: str
    expires_at: datetime | None = None
    request_id: str | None = None


# --- priced resources ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResourceMetadata:
    """What a payment for the resource buys.

    ``sku_kind`` is ``one_shot`` (one access) or ``credit_topup`` (``credits`` units of
    ``credit_unit`` that the seller's app adds to the buyer).  Anything else the seller
    stored is kept in ``extra`` and written back flat on the wire.
    """

    sku_kind: str = "one_shot"
    credits: Decimal | None = None
    credit_unit: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Resource:
    """A priced HTTP path or MCP tool.

    ``pricing`` is ``fixed`` (``amount`` is the price) or ``metered``: the payer
    authorises up to ``max_amount`` and is charged ``units`` used * ``unit_price``, at
    most ``max_amount``, once the answer has been delivered.  ``amount`` is always the
    most one payment costs (``max_amount`` when metered), so a client that knows nothing
    of metering still authorises enough; ``fallback_amount`` is the fixed price offered
    where a rail cannot meter (MPP's ``charge``, the card buy page), ``None``: none.
    """

    id: str
    short_id: str
    kind: str
    amount: Decimal
    gate_url: str
    pay_url: str
    path_or_tool: str
    path: str | None = None
    tool: str | None = None
    active: bool = True
    description: str | None = None
    metadata: ResourceMetadata = attrs.field(factory=ResourceMetadata)
    upstream_url: str | None = None
    listed: bool = False
    #: The one HTTP method the hosted gate sells; ``None``: any method.
    method: str | None = None
    #: A JSON body for callers to copy with their own values (``POST``/``PUT``/``PATCH``).
    body_hint: dict[str, Any] | None = None
    pricing: str = "fixed"
    #: Metered only: the price of one ``unit`` (``token``, ``result``, ``byte`` ...).
    unit_price: Decimal | None = None
    unit: str | None = None
    max_amount: Decimal | None = None
    fallback_amount: Decimal | None = None
    seller_id: str | None = None
    environment: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ResourceList:
    data: list[Resource]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class DirectoryEntry:
    """A resource its seller listed (``GET /directory``): what it is, what it costs, where
    to pay it and how to call it."""

    id: str
    kind: str
    amount: Decimal
    gate_url: str
    pay_url: str
    #: The rails the gate takes: ``rill`` (the ledger) always, ``x402`` and ``mpp`` once
    #: the seller has enabled payments.
    rails: list[str]
    description: str | None = None
    #: The one HTTP method the gate sells; ``None``: any method.
    method: str | None = None
    #: A JSON body to copy with your own values (``pay-url`` with ``method: POST``).
    body_hint: dict[str, Any] | None = None
    #: ``fixed`` or ``metered`` (``amount`` is then the most one payment costs; see
    #: :class:`Resource`).
    pricing: str = "fixed"
    unit_price: Decimal | None = None
    unit: str | None = None
    max_amount: Decimal | None = None
    fallback_amount: Decimal | None = None
    seller_name: str | None = None
    environment: str | None = None
    created_at: datetime | None = None


@attrs.frozen(kw_only=True)
class DirectoryList:
    data: list[DirectoryEntry]
    has_more: bool = False
    request_id: str | None = None


# --- spend and pay ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class PayResult:
    """What ``POST /pay`` returns (``POST /spend/pay-url`` returns :class:`PayUrlResult`)."""

    receipt_id: str
    rail: str
    ok: bool = True
    attempt_id: str | None = None
    tx_hash: str | None = None
    amount: Decimal | None = None
    resource_id: str | None = None
    status: int | None = None
    body: str | None = None
    headers: dict[str, str] | None = None
    body_truncated: bool = False
    destination: str | None = None
    settlement: str | None = None
    #: The payment signed (a compact JWS): proof any gate checks offline against the
    #: service's ``/.well-known/jwks.json`` (``svc.receipts.verify``); ``None`` for a
    #: metered hold, which proves nothing until it is captured.  A bearer proof: masked
    #: in ``repr`` like a key.
    receipt_token: str | None = secret(None)
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class PayUrlResult:
    """``POST /spend/pay-url``: the URL was paid on an open rail, and what it answered.

    ``body`` is the unlocked response body, at most 8 KB of it (``body_truncated`` says it
    was cut): UTF-8 text when ``body_encoding`` is ``utf-8`` (never cut inside a
    character), base64 when it is ``base64`` (the bytes were not UTF-8); :attr:`content`
    gives the bytes either way.  ``unlocked`` is false when the payment settled but the
    URL still answered an error (``upstream_status``): the money is spent and accounted
    for, the answer is returned as it came, and ``note`` says so.

    Two receipts stand for one payment, one per side:

    - ``payer_receipt_id``: the payer's, booked for the wallet key (``receipt_id`` is the
      same id, kept under its first name).  It is the agent's record of the spend; a
      seller's ``access.verify`` does not know it.
    - ``seller_receipt_id``: the seller's, the one the seller verifies (``access.verify``)
      and its ``payment.succeeded`` webhook names.  Known when the paid URL is a gate of
      this service (the receipt booked for the same transaction) or when the URL returned
      one (``X-Svc-Receipt``); ``None`` otherwise.

    A metered offer (x402 ``upto``) was signed for ``max_amount`` (what the wallet key's
    policy checked and held); ``amount`` is what the URL settled, the only part spent.
    """

    attempt_id: str
    rail: str
    ok: bool = True
    status: str = "succeeded"
    amount: Decimal | None = None
    #: A metered payment's signed maximum (``None``: a fixed price, ``amount`` is it).
    max_amount: Decimal | None = None
    receipt_id: str | None = None
    payer_receipt_id: str | None = attrs.field(
        default=attrs.Factory(lambda self: self.receipt_id, takes_self=True)
    )
    seller_receipt_id: str | None = None
    tx_hash: str | None = None
    network: str | None = None
    pay_to: str | None = None
    unlocked: bool = True
    upstream_status: int | None = None
    body: str = ""
    body_encoding: str = "utf-8"
    body_truncated: bool = False
    headers: dict[str, str] = attrs.field(factory=dict)
    #: Set when the payment settled but the URL answered an error (``unlocked`` false).
    note: str | None = None
    #: The payer's receipt signed (a compact JWS, like :attr:`PayResult.receipt_token`):
    #: the agent's proof that it paid, checked offline with ``svc.receipts.verify``
    #: against the service's ``/.well-known/jwks.json``.  A bearer proof: masked in
    #: ``repr`` like a key.
    receipt_token: str | None = secret(None)
    request_id: str | None = None

    @property
    def content(self) -> bytes:
        """The body as bytes (decoded from base64 when it was sent so)."""
        if self.body_encoding == "base64":
            return base64.b64decode(self.body)
        return self.body.encode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON, like ``httpx.Response.json()``.

        Raises :class:`ValueError` for a body that is not JSON, or that was cut
        (``body_truncated``): a prefix of a JSON document is not JSON.
        """
        if self.body_truncated:
            raise ValueError("the unlocked body was cut at 8 KB (body_truncated); it is not whole")
        return json.loads(self.content)


@attrs.frozen(kw_only=True)
class PayUrlQuote:
    """``POST /spend/pay-url`` with ``dry_run``: what paying the URL would do, with nothing
    paid, reserved or recorded.

    ``rail``, ``amount``, ``network`` and ``pay_to`` are the offer the service would pay
    (absent when ``host_not_allowed`` stopped it before the URL was asked); ``allowed``
    says whether the wallet key's policy and balance let it, and ``blocked_by`` names the
    rule that does not -- ``host_not_allowed``, ``rail_not_allowed``,
    ``max_per_tx_exceeded``, ``allowance_exceeded`` (``details.next_reset_at``),
    ``budget_exceeded`` or ``insufficient_funds`` -- with its numbers in ``details``.
    ``metered``: the offer is x402 ``upto``, priced by use: ``amount`` (and
    ``max_amount``) is the most it can cost, which the policy checks; paying spends only
    what the URL settles.
    """

    url: str
    host: str
    allowed: bool
    ok: bool = True
    dry_run: bool = True
    rail: str | None = None
    amount: Decimal | None = None
    max_amount: Decimal | None = None
    metered: bool = False
    network: str | None = None
    pay_to: str | None = None
    blocked_by: ErrorDetail | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class SpendAttempt:
    """One ``pay-url`` attempt (``GET /spend/attempts``), without its body.

    ``status``: ``probing``, ``paying``, ``succeeded``, ``failed``, or ``pending`` (live
    only: paid but not confirmed by the URL; the amount stays reserved until reconciled).
    """

    id: str
    status: str
    url: str | None = None
    method: str | None = None
    host: str | None = None
    rail: str | None = None
    #: Reserved while paying; once settled, what was spent (at most ``max_amount``).
    amount: Decimal | None = None
    #: A metered (x402 ``upto``) payment's signed maximum.
    max_amount: Decimal | None = None
    receipt_id: str | None = None
    tx_hash: str | None = None
    upstream_status: int | None = None
    error: ErrorDetail | None = None
    #: Set when the payment settled but the URL answered an error.
    note: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@attrs.frozen(kw_only=True)
class SpendAttemptList:
    data: list[SpendAttempt]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Approval:
    """A payment waiting for (or given) a person's decision (docs/approvals.md).

    ``status``: ``pending`` (held, waiting), ``approved`` (the agent's repeat pays it),
    ``declined``, ``expired``, or ``used`` (paid: ``receipt_id``).  ``approval_url`` is
    the one-time page a person opens to decide, shown while it is ``pending``.
    """

    id: str
    status: str
    amount: Decimal
    wallet_key_id: str
    expires_at: datetime
    created_at: datetime
    object: str = "approval"
    #: ``approval_required`` while the payment waits for a person.
    code: str | None = None
    currency: str = "USD"
    environment: str | None = None
    #: ``pay-url``: what is paid.
    url: str | None = None
    method: str | None = None
    #: ``POST /pay``: the resource paid.
    resource_id: str | None = None
    approval_url: str | None = None
    decided_at: datetime | None = None
    receipt_id: str | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ApprovalList:
    data: list[Approval]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ReceiptVerification:
    """``POST /access/verify``: an unknown receipt is ``valid: false``, not an error."""

    valid: bool
    receipt_id: str
    ok: bool = True
    resource_id: str | None = None
    amount: Decimal | None = None
    rail: str | None = None
    metadata: ResourceMetadata | None = None
    environment: str | None = None
    created_at: datetime | None = None
    #: Why ``valid`` is false (unknown receipt, another resource...).
    reason: str | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Receipt:
    """``GET /receipts/{id}``: one payment as its payer or its seller may read it.

    ``status`` is ``settled``; or, for a metered payment on the ledger rail,
    ``authorized`` (``max_amount`` held, nothing charged yet) until the gate reports the
    units used, then ``settled`` (``amount`` = ``units`` * the unit price, at most
    ``max_amount``) or ``released`` (nothing used, nothing charged).
    """

    id: str
    status: str
    amount: Decimal
    rail: str
    resource_id: str | None = None
    seller_id: str | None = None
    #: Metered payments: the units used and the most the payer authorised.
    units: int | None = None
    unit: str | None = None
    max_amount: Decimal | None = None
    tx_hash: str | None = None
    network: str | None = None
    environment: str | None = None
    created_at: datetime | None = None
    settled_at: datetime | None = None
    #: A fresh signed token for a settled receipt (see :attr:`PayResult.receipt_token`).
    receipt_token: str | None = secret(None)
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Payment:
    """``GET /payments/{receipt_id}``: where a payment stands, for a client that lost the
    answer.  ``state`` is ``claimed`` (held, not settled yet: an open-rail credential
    claimed by a gate, or a metered authorization), ``settled``, ``released`` (nothing
    was charged) or ``refunded`` (all or part given back: ``refunded`` says how much,
    ``remaining`` what is still paid)."""

    receipt_id: str
    state: str
    amount: Decimal
    refunded: Decimal = Decimal(0)
    remaining: Decimal = Decimal(0)
    rail: str | None = None
    settlement: str | None = None
    resource_id: str | None = None
    environment: str | None = None
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Refund:
    """``POST /refunds``: all or part of a payment given back by its seller.  ``status``
    ``succeeded``: on the ledger rail the money is back on the payer's wallet key at once;
    an open-rail ``processor_deposit`` payment's refund is ``pending`` until the hot
    wallet's transaction (``tx_hash``) to the payer's address is sent, ``failed`` if it
    could not be (the money is back on the seller's balance)."""

    id: str
    receipt_id: str
    amount: Decimal
    status: str
    reason: str | None = None
    seller_id: str | None = None
    environment: str | None = None
    created_at: datetime | None = None
    tx_hash: str | None = None
    #: Why a refund on chain ``failed``.
    failure_reason: str | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class RefundList:
    data: list[Refund]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class GateChallenge:
    """``POST /gates/challenge``: the open-rail challenge for one unpaid request to a gate.

    ``headers`` go on the gate's 402 as they are: an x402 ``PAYMENT-REQUIRED`` and an MPP
    ``WWW-Authenticate: Payment``, bound to the request's method and URL, with a fresh
    nonce each time (never cache them).  Empty when the seller has not enabled payments,
    or the environment offers no open rail.
    """

    headers: list[tuple[str, str]] = attrs.field(factory=list)
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class GateRedemption:
    """``POST /gates/redeem``: what became of an open-rail credential presented at a gate.

    Paid: ``verification`` is the service receipt it settled into and ``headers`` are
    the paid response's (``Payment-Receipt``, and ``PAYMENT-RESPONSE`` for x402).  Not
    paid: ``reason`` is the gate's ``receipt_refused`` or ``receipt_malformed``,
    ``message`` says why, and ``headers`` are the 402's fresh challenge (none after a
    replayed credential: a new challenge would invite the client to pay again).
    ``POST /gates/settle`` of a metered ``upto`` claim with ``units`` 0: ``reason`` is
    ``released`` (no usage was reported; the claim is released, nothing was charged and
    nothing failed), which a gate treats as "nothing charged", not as a refusal.
    """

    paid: bool
    #: The protocol of the credential: ``x402`` or ``mpp``.
    rail: str | None = None
    verification: ReceiptVerification | None = None
    headers: list[tuple[str, str]] = attrs.field(factory=list)
    reason: str | None = None
    message: str | None = None
    #: Claimed (``POST /gates/redeem``): the credential is verified and its nonce held,
    #: nothing has moved yet; settle it (``POST /gates/settle``) once the answer succeeded,
    #: or release it (``POST /gates/release``).  ``paid`` is false until settled.
    claim: str | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class GateRelease:
    """``POST /gates/release``: the claim was released; nothing moved, and the payer's
    authorization may be presented again."""

    released: bool = True
    claim: str | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WalletPolicy:
    """Spend limits of a wallet key; ``None`` means no limit of that kind."""

    allowance: Decimal | None = None
    max_per_tx: Decimal | None = None
    budget: Decimal | None = None
    period: str = "none"
    allowed_hosts: list[str] | None = None
    allowed_rails: list[str] | None = None
    #: A payment strictly above this waits for a person's approval (docs/approvals.md).
    approval_above: Decimal | None = None
    #: Payments to these hosts always wait for a person's approval.
    approval_hosts: list[str] | None = None
    #: How long an approval waits, in seconds.
    approval_ttl_seconds: int = 900


@attrs.frozen(kw_only=True)
class WalletKey:
    id: str
    environment: str
    policy: WalletPolicy
    balance: Decimal
    name: str | None = None
    status: str = "active"
    key_prefix: str | None = None
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WalletKeyCreated(WalletKey):
    """A new wallet key; ``key`` is never shown again."""

    key: str = secret()


@attrs.frozen(kw_only=True)
class TopUp:
    """Money the owner paid into their account wallet: from their own wallet (x402 or
    MPP, to the environment's deposit address), credited once settled on chain; or by
    card at the processor's Checkout (live), credited once the processor says it paid."""

    id: str
    amount: Decimal
    environment: str
    #: ``succeeded``: paid and credited to the account wallet.  A card top-up is
    #: ``pending`` until paid at ``checkout_url``, ``failed`` when the card was declined
    #: (paying it with another card still succeeds it), ``expired`` when abandoned.
    status: str
    #: ``x402``, ``mpp`` or ``card``.
    rail: str
    #: The settlement transaction; a card top-up's PaymentIntent id (``pi_…``) once paid,
    #: ``None`` before.
    tx_hash: str | None = None
    #: ``crypto`` (x402 or MPP, the default) or ``card``.
    method: str = "crypto"
    #: Where the payer pays a pending card top-up (the processor's Checkout page).
    checkout_url: str | None = None
    network: str | None = None
    payer: str | None = None
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class TopUpList:
    data: list[TopUp]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WalletKeyList:
    data: list[WalletKey]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Handle:
    """A ``@name`` an owner claimed; ledger transfers to it land in the owner's wallet."""

    id: str
    handle: str
    environment: str
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class HandleResolution:
    """``GET /handles/resolve/:destination``: the destination exists and can be paid."""

    destination: str
    handle: str
    environment: str
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class SpendBalance:
    """``GET /spend/balance``: prepaid balance and what the policy still allows."""

    balance: Decimal
    policy: WalletPolicy
    remaining_allowance: Decimal | None = None
    remaining_budget: Decimal | None = None
    spent_this_period: Decimal | None = None
    spent_total: Decimal | None = None
    period_started_at: datetime | None = None
    next_reset_at: datetime | None = None
    status: str = "active"
    wallet_key_id: str | None = None
    environment: str | None = None
    request_id: str | None = None


# --- webhooks and events ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class WebhookEndpoint:
    id: str
    url: str
    environment: str
    events: list[str] | None = None
    description: str | None = None
    #: ``enabled``, ``disabled`` (see ``disabled_reason``) or ``deleted``.
    status: str = "enabled"
    disabled_reason: str | None = None
    created_at: datetime | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WebhookEndpointList:
    data: list[WebhookEndpoint]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class WebhookEndpointCreated(WebhookEndpoint):
    """A new endpoint and its signing secret; the secret is never shown again."""

    signing_secret: str = secret()


@attrs.frozen(kw_only=True)
class DeliveryAttempt:
    """One try at delivering: what the receiver answered (body capped), or the error."""

    number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None = None
    error: str | None = None
    response_body: str | None = None
    #: ``schedule`` (the outbox worker), ``retry`` (the retry route) or ``test``.
    trigger: str = "schedule"


@attrs.frozen(kw_only=True)
class Delivery:
    """One event on its way to one endpoint; ``id`` (the ``deliveryId``) never changes
    across retries."""

    id: str
    webhook_id: str
    event_id: str
    event_type: str
    #: ``pending`` (next attempt at ``next_attempt_at``), ``succeeded``, ``failed``
    #: (retries exhausted) or ``cancelled`` (endpoint deleted or disabled).
    status: str
    attempts: int = 0
    last_status_code: int | None = None
    last_error: str | None = None
    next_attempt_at: datetime | None = None
    created_at: datetime | None = None
    delivered_at: datetime | None = None
    attempt_log: list[DeliveryAttempt] = attrs.field(factory=list)
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class DeliveryList:
    data: list[Delivery]
    has_more: bool = False
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class ListenedDelivery:
    """One delivery handed to ``svc listen``: the exact body and signed headers the outbox
    would have sent, for the CLI to forward as they are."""

    delivery_id: str
    event_id: str
    event_type: str
    headers: dict[str, str]
    body: str


@attrs.frozen(kw_only=True)
class ListenBatch:
    data: list[ListenedDelivery]
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class EventType:
    type: str
    description: str


@attrs.frozen(kw_only=True)
class EventCatalog:
    """``GET /webhooks/events``: every event the service emits."""

    data: list[EventType]
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class PaymentSucceededData:
    """``data`` of ``payment.succeeded``: every field of the spec's table.

    Only ``receipt_id`` is required: the webhook test route sends a sample carrying
    ``receipt_id``, ``request_id``, ``metadata.credits`` and ``test``, and a receiver must
    read that sample with the same class it uses for real payments.
    """

    receipt_id: str
    ok: bool = True
    type: str | None = None
    rail: str | None = None
    amount: Decimal | None = None
    environment: str | None = None
    settlement: str | None = None
    request_id: str | None = None
    resource_id: str | None = None
    short_id: str | None = None
    path_or_tool: str | None = None
    metadata: ResourceMetadata = attrs.field(factory=ResourceMetadata)
    seller_id: str | None = None
    platform_fee: Decimal | None = None
    processor_payment_intent_id: str | None = None
    seller_balance: Decimal | None = None
    #: Open rails: the settling transaction, who signed it and on which network.
    tx_hash: str | None = None
    payer: str | None = None
    network: str | None = None
    test: bool | None = None


@attrs.frozen(kw_only=True)
class PaymentFailedData:
    """``data`` of ``payment.failed``: a payment was refused or did not settle.

    Sent to the payer's owner when a wallet key's payment is refused (``rail: rill``
    today; open rails too once they land).  ``reason`` is the error ``code`` the payer got
    (``allowance_exceeded``, ``insufficient_funds``...) and ``message`` its text.

    Also sent to a *seller's* owner when an open-rail credential (``rail`` ``x402`` or
    ``mpp``) presented at one of its gates is refused (replayed, unfunded, badly signed):
    ``reason`` is then the gate's ``receipt_refused`` or ``receipt_malformed`` and
    ``payer`` the address that signed it.  A credential verified and claimed whose
    answer failed is released, not charged: ``reason`` ``answer_failed`` with the answer's
    ``status``; ``claim_expired`` for a claim never settled nor released;
    ``settlement_refused`` when settling after a successful answer failed.
    """

    ok: bool = False
    type: str | None = None
    rail: str | None = None
    reason: str | None = None
    message: str | None = None
    request_id: str | None = None
    attempt_id: str | None = None
    wallet_key_id: str | None = None
    resource_id: str | None = None
    short_id: str | None = None
    seller_id: str | None = None
    amount: Decimal | None = None
    environment: str | None = None
    settlement: str | None = None
    #: Open rails: the address that signed the refused credential, when it could be read.
    payer: str | None = None
    #: Open rails, ``answer_failed``: the status of the answer that was not charged.
    status: int | None = None


@attrs.frozen(kw_only=True)
class TransferReceivedData:
    """``data`` of ``transfer.received``: a ledger transfer (``POST /pay`` to a handle)
    reached one of the owner's handles.  ``receipt_id`` is the dedupe key."""

    receipt_id: str
    request_id: str | None = None
    #: The handle paid, ``@name``.
    destination: str | None = None
    amount: Decimal | None = None
    rail: str | None = None
    settlement: str | None = None
    environment: str | None = None
    #: The receiving owner's account wallet balance after the transfer.
    account_wallet_balance: Decimal | None = None


@attrs.frozen(kw_only=True)
class FundingPaidData:
    """``data`` of ``funding.paid``: money was added to a wallet key, or (a top-up,
    ``wallet_key_id`` null) to the owner's account wallet from the owner's own wallet."""

    #: The wallet key funded; ``None`` (always sent) for a top-up of the account wallet.
    wallet_key_id: str | None
    amount: Decimal | None = None
    #: The wallet key's balance after the funding.
    balance: Decimal | None = None
    #: ``sandbox`` (Test: instant sandbox money) or ``account_wallet``; for a top-up,
    #: the rail that paid it: ``x402`` or ``mpp``.
    source: str | None = None
    transfer_id: str | None = None
    environment: str | None = None
    #: Top-ups: the top-up, the account wallet's balance after it, and the settlement.
    top_up_id: str | None = None
    account_wallet_balance: Decimal | None = None
    tx_hash: str | None = None
    payer: str | None = None
    network: str | None = None
    #: Card top-ups: the processor's PaymentIntent that paid it (``pi_…``).
    processor_payment_intent_id: str | None = None


@attrs.frozen(kw_only=True)
class PaymentRefundedData:
    """``data`` of ``payment.refunded`` (beyond the spec's list): a seller gave back all or
    part of a payment."""

    receipt_id: str
    refund_id: str | None = None
    amount: Decimal | None = None
    #: What refunds gave back so far, and what is still paid.
    refunded: Decimal | None = None
    remaining: Decimal | None = None
    reason: str | None = None
    rail: str | None = None
    seller_id: str | None = None
    wallet_key_id: str | None = None
    environment: str | None = None
    #: A refund sent on chain (an open-rail ``processor_deposit`` payment): the hot
    #: wallet's transaction to the payer's address.
    tx_hash: str | None = None


@attrs.frozen(kw_only=True)
class PaymentRefundFailedData(PaymentRefundedData):
    """``data`` of ``payment.refund_failed`` (beyond the spec's list): a refund that was
    pending (sent on chain, or asked of the card processor) failed; its amount is back on
    the seller's balance and may be refunded anew."""

    failure_reason: str | None = None


@attrs.frozen(kw_only=True)
class ApprovalRequestedData:
    """``data`` of ``approval.requested`` (beyond the spec's list): a wallet key's payment
    waits for a person.  The link is not in the event (its token is never stored): the
    owner reads it with ``GET /spend/approvals/{approval_id}``."""

    approval_id: str
    wallet_key_id: str | None = None
    amount: Decimal | None = None
    url: str | None = None
    resource_id: str | None = None
    expires_at: datetime | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class ApprovalDecidedData:
    """``data`` of ``approval.decided`` (beyond the spec's list): ``decision`` is
    ``approved``, ``declined`` or ``expired`` (the last two released the hold)."""

    approval_id: str
    wallet_key_id: str | None = None
    decision: str | None = None
    amount: Decimal | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class FundingRefundedData:
    """``data`` of ``funding.refunded``: money went back from a wallet key to the owner's
    account wallet."""

    wallet_key_id: str
    amount: Decimal | None = None
    #: The wallet key's available balance after the refund.
    balance: Decimal | None = None
    #: ``refund`` (``POST /wallet-keys/:id/refund``) or ``revoke`` (the rest of the
    #: balance of a key being revoked).
    reason: str | None = None
    transfer_id: str | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class WalletKeyRevokedData:
    """``data`` of ``vw.revoked``: a wallet key was revoked for good."""

    wallet_key_id: str
    #: What went back to the account wallet (``0.00`` when the key was empty).
    returned_amount: Decimal | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class AllowanceResetData:
    """``data`` of ``allowance.reset``: a wallet key's period ended and its allowance is
    whole again."""

    wallet_key_id: str
    #: ``day``, ``week`` or ``month``.
    period: str | None = None
    #: The allowance per period; ``None``: the key has no allowance limit.
    allowance: Decimal | None = None
    spent_last_period: Decimal | None = None
    period_started_at: datetime | None = None
    #: ``None`` when the key no longer resets.
    next_reset_at: datetime | None = None


@attrs.frozen(kw_only=True)
class ResourceUpdatedData:
    """``data`` of ``resource.updated``: the resource as it is now, and which of its
    fields changed (``amount``, ``path``, ``active``...)."""

    resource: Resource
    changed: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class WithdrawalPaidData:
    """``data`` of ``withdrawal.paid``: a withdrawal reached the payout account."""

    withdrawal_id: str
    seller_id: str | None = None
    amount: Decimal | None = None
    status: str | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class WithdrawalFailedData:
    """``data`` of ``withdrawal.failed``: a withdrawal failed and the seller balance was
    restored; ``reason`` says why."""

    withdrawal_id: str
    seller_id: str | None = None
    amount: Decimal | None = None
    status: str | None = None
    reason: str | None = None
    environment: str | None = None


@attrs.frozen(kw_only=True)
class SellerWithdrawnData:
    """``data`` of ``seller.withdrawn``: a seller's balance left it, to the payout account
    (a withdraw) or to the owner's account wallet (a recycle)."""

    seller_id: str
    amount: Decimal | None = None
    #: ``payout_account`` (withdraw) or ``account_wallet`` (recycle).
    destination: str | None = None
    #: Set for a withdraw to the payout account.
    withdrawal_id: str | None = None
    #: The seller's balance afterwards.
    balance: Decimal | None = None
    environment: str | None = None


#: ``data`` classes by event type; types not listed are read as plain dicts.
EVENT_DATA_TYPES: dict[str, type[Any]] = {
    "payment.succeeded": PaymentSucceededData,
    "payment.failed": PaymentFailedData,
    "payment.refunded": PaymentRefundedData,
    "payment.refund_failed": PaymentRefundFailedData,
    "approval.requested": ApprovalRequestedData,
    "approval.decided": ApprovalDecidedData,
    "transfer.received": TransferReceivedData,
    "funding.paid": FundingPaidData,
    "funding.refunded": FundingRefundedData,
    "withdrawal.paid": WithdrawalPaidData,
    "withdrawal.failed": WithdrawalFailedData,
    "vw.revoked": WalletKeyRevokedData,
    "allowance.reset": AllowanceResetData,
    "seller.withdrawn": SellerWithdrawnData,
    "resource.updated": ResourceUpdatedData,
}


@attrs.frozen(kw_only=True)
class Event:
    """The body of a webhook delivery.  ``data`` is typed for the event types SDK knows."""

    id: str
    type: str
    created_at: datetime
    data: Any


# --- health and discovery -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Health:
    ok: bool
    status: str
    checks: dict[str, str] | None = None
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Jwks:
    """``GET /.well-known/jwks.json``: the public keys receipt tokens are signed with
    (OKP Ed25519 JWKs, each with its ``kid``), for :func:`svc.receipts.verify`."""

    keys: list[dict[str, Any]]
    request_id: str | None = None


@attrs.frozen(kw_only=True)
class Capabilities:
    """``GET /agent/capabilities``: what an agent needs to start paying."""

    auth_modes: list[dict[str, Any]]
    pay_shapes: list[dict[str, Any]]
    mcp_urls: list[str] = attrs.field(factory=list)
    trust_ladder: list[dict[str, Any]] = attrs.field(factory=list)
    seed_ids: dict[str, Any] = attrs.field(factory=dict)
    environments: list[str] = attrs.field(factory=list)
    request_id: str | None = None

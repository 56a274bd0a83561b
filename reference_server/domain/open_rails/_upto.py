"""x402 ``upto`` at a metered resource's gate: the payer signs a maximum (a Permit2
authorization naming the facilitator), the gate settles what the answer used.

* :func:`challenge` — a metered resource's 402: x402 ``upto`` requirements for its
  ``max_amount``, bound to the resource and the request's method like pympp's exact
  challenge (:func:`._pympp.x402_unbound` checks what the client echoes); with a
  ``fallback_amount``, pympp's exact / MPP challenge at that fixed price as well;
* :func:`claim` — verify the authorization against the maximum (the sandbox chain's
  checks; live, the facilitator's ``/verify``), claim its Permit2 nonce once across
  processes, keep a hold (:mod:`._holds`) whose provisional amount is the maximum;
* :func:`settle` — move ``metered_amount(units, unit_price, max)``: ``test`` on the sandbox
  chain and booked in the same transaction, ``live`` through the facilitator's ``/settle``
  with the requirements' ``amount`` the actual one (x402 ``upto``), booked on its hash.
  Zero releases the hold: nothing moves, nothing failed, so no ``payment.failed``.

Imported, like :mod:`._pympp`, only through :func:`..._engine` (it imports pympp).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from mpp.x402 import route_extensions
from mpp.x402.facilitator import FacilitatorError, HttpFacilitator
from sqlalchemy.exc import IntegrityError

from svc.money import format_micros, from_micros, metered_amount, to_micros
from svc_asgi import RailRequest

from ...context import ServerContext
from ...ids import new_id
from ...sandbox import chain, upto
from ...sandbox.x402_wire import Refused
from ..events import writing
from ._claims import ClaimStore
from ._credit import credit, mark_metered, receipt_for_transaction, record_refusal
from ._holds import Hold, free_claim, record_settled, save_hold, save_unsettled, take_hold
from ._model import Gate, HoldNotFound, Redemption, SettlementUnavailable
from ._pympp import (
    binding_of,
    facilitator_http,
    held_redemption,
    receipt_headers,
    settlement_refused,
    unbound_payment,
    verification,
)
from ._pympp import challenge as exact_challenge
from ._terms import RailTerms, upto_facilitator

__all__ = ["challenge", "claim", "is_upto", "requirements", "settle"]

log = logging.getLogger("reference_server.open_rails")

#: How long a signed maximum stays good (``maxTimeoutSeconds``, the Permit2 deadline the
#: client signs): a streamed answer is served between the claim and the settlement, so
#: the authorization must outlive the longest stream a hold waits for
#: (:data:`._holds.HOLD_TTL`, ten minutes).
MAX_TIMEOUT_SECONDS = 600


def requirements(ctx: ServerContext, gate: Gate, terms: RailTerms) -> dict[str, Any] | None:
    """The x402 ``upto`` requirements for ``gate``'s maximum, or ``None`` when its terms
    offer none (x402 not enabled; live without ``live_upto_facilitator_address``)."""
    facilitator = upto_facilitator(ctx.settings, terms)
    if not facilitator:
        return None
    asset = terms.asset
    return {
        "scheme": "upto",
        "network": asset.network,
        "asset": asset.address,
        "amount": str(int(gate.resource.amount_micros)),
        "payTo": terms.recipient,
        "maxTimeoutSeconds": MAX_TIMEOUT_SECONDS,
        "extra": {
            "facilitatorAddress": facilitator,
            "name": asset.name,
            "version": asset.version,
            "assetTransferMethod": "permit2",
        },
    }


async def challenge(
    ctx: ServerContext, gate: Gate, terms: RailTerms, secret: str, request: RailRequest
) -> list[tuple[str, str]]:
    """A metered resource's challenge headers: ``upto`` first in ``PAYMENT-REQUIRED``;
    pympp's exact and MPP challenges at the fallback price when there is one."""
    offer = requirements(ctx, gate, terms)
    headers: list[tuple[str, str]] = []
    if gate.resource.fallback_amount_micros is not None:
        headers = await exact_challenge(ctx, gate, terms, secret, request)
    if offer is None:
        return headers
    exact = [value for name, value in headers if name == "PAYMENT-REQUIRED"]
    accepts = [offer] + (_decoded(exact[0])["accepts"] if exact else [])
    extensions = route_extensions(http_method=request.method, meta=binding_of(gate))
    required = {
        "x402Version": 2,
        "accepts": accepts,
        "resource": {"url": request.url},
        "error": "PAYMENT-SIGNATURE header is required",
        "extensions": extensions,
    }
    return [(name, v) for name, v in headers if name != "PAYMENT-REQUIRED"] + [
        ("PAYMENT-REQUIRED", _encoded(required))
    ]


def _encoded(value: Mapping[str, Any]) -> str:
    """x402's header encoding (base64 JSON); pympp's encoder takes ``exact`` only."""
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(raw).decode("ascii")


def _decoded(value: str) -> dict[str, Any]:
    """A base64 JSON x402 header (pympp's decoder takes ``exact`` only); ``{}`` when it
    is not one."""
    try:
        decoded = json.loads(base64.b64decode(value, validate=True))
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def is_upto(credentials: Mapping[str, str]) -> bool:
    """Is the x402 credential among ``credentials`` an ``upto`` payment?"""
    signature = credentials.get("payment-signature")
    if signature is None:
        return False
    accepted = _decoded(signature).get("accepted")
    return isinstance(accepted, Mapping) and accepted.get("scheme") == "upto"


async def claim(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    secret: str,
    request: RailRequest,
    signature: str,
    request_id: str,
) -> Redemption:
    """Verify an ``upto`` payment against the maximum and claim its nonce, moving
    nothing; see :func:`..claim`."""
    offer = requirements(ctx, gate, terms)
    payment = _decoded(signature)
    payer = _payer(payment)
    if offer is None:
        why: str | None = "this gate takes no x402 upto payment"
    else:
        why = unbound_payment(payment, request, binding_of(gate))
    if why is not None or offer is None:
        return await _refused(ctx, gate, terms, request_id, str(why), payer, request, secret)
    store = ClaimStore(ctx.db, ctx.now)
    key = f"upto:{offer['network']}:{payer}:{_nonce(payment)}".lower()
    # Presented before (held or settled): no new challenge, which would invite a second
    # payment.  Asked before verifying, which would refuse a settled one as "spent".
    used = "this upto authorization was already presented"
    if await store.get(key) is not None:
        return await _refused(ctx, gate, terms, request_id, used, payer)
    why = await _refusal(ctx, terms, payment, offer)
    if why is not None:
        return await _refused(ctx, gate, terms, request_id, why, payer, request, secret)
    if not await store.put_if_absent(key, "held"):
        return await _refused(ctx, gate, terms, request_id, used, payer)
    resource = gate.resource
    hold = Hold(
        claim=new_id("clm"),
        claim_key=key,
        receipt_id=new_id("rcpt"),
        resource_id=resource.id,
        seller_id=gate.seller.id,
        environment=resource.environment,
        rail="x402",
        payer=payer,
        payload=payment,
        request=offer,
        request_id=request_id,
        scheme="upto",
    )
    await anyio.to_thread.run_sync(save_hold, ctx.db, hold, ctx.now())
    return held_redemption(resource, hold, int(resource.amount_micros))


def _payer(payment: Mapping[str, Any]) -> str | None:
    inner = payment.get("payload")
    auth = inner.get("permit2Authorization") if isinstance(inner, Mapping) else None
    payer = auth.get("from") if isinstance(auth, Mapping) else None
    return payer if isinstance(payer, str) else None


def _nonce(payment: Mapping[str, Any]) -> str:
    inner = payment.get("payload")
    auth = inner.get("permit2Authorization") if isinstance(inner, Mapping) else None
    return str(auth.get("nonce")) if isinstance(auth, Mapping) else ""


def _body(payment: Mapping[str, Any], offer: Mapping[str, Any]) -> dict[str, Any]:
    """A verify/settle body as x402's facilitator client sends it."""
    return {"x402Version": 2, "paymentPayload": payment, "paymentRequirements": offer}


async def _refusal(
    ctx: ServerContext, terms: RailTerms, payment: dict[str, Any], offer: dict[str, Any]
) -> str | None:
    """Why the maximum would not settle now, or ``None``."""
    if terms.sandbox:

        def check() -> str | None:
            try:
                parsed = upto.parse_request(_body(payment, offer))
                with ctx.db.read() as conn:
                    upto.check(conn, parsed, now=ctx.now())
            except (Refused, chain.ChainError) as refused:
                return refused.message
            return None

        return await anyio.to_thread.run_sync(check)
    async with facilitator_http(terms) as http:
        facilitator = HttpFacilitator(terms.facilitator_url or "", client=http)
        try:
            verified = await facilitator.verify(payment, offer)  # type: ignore[arg-type]
        except FacilitatorError as exc:
            raise SettlementUnavailable(str(exc)) from exc
    if verified.get("isValid"):
        return None
    return str(verified.get("invalidMessage") or verified.get("invalidReason") or "invalid")


async def _refused(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    request_id: str,
    message: str,
    payer: str | None,
    request: RailRequest | None = None,
    secret: str = "",
) -> Redemption:
    """Refuse the payment (``payment.failed``), with a fresh challenge for ``request``
    (none without one: a replay)."""
    headers = [] if request is None else await challenge(ctx, gate, terms, secret, request)

    def record() -> None:
        with writing(ctx.db, ctx.notify_new_events) as conn:
            record_refusal(
                conn,
                resource=gate.resource,
                seller=gate.seller,
                terms=terms,
                rail="x402",
                reason="receipt_refused",
                message=message,
                payer=payer,
                request_id=request_id,
                now=ctx.now(),
            )

    await anyio.to_thread.run_sync(record)
    return Redemption(
        paid=False,
        rail="x402",
        reason="receipt_refused",
        message=message,
        headers=headers,
        payer=payer,
    )


# --- settling the actual amount -------------------------------------------------------------


def actual_amount(resource: Any, units: int | None) -> int:
    """What ``units`` cost, capped at the maximum; ``None`` (no usage reported, as a card
    captured without an amount) is the maximum."""
    maximum = int(resource.amount_micros)
    if units is None:
        return maximum
    cost = metered_amount(units, from_micros(int(resource.unit_price_micros)), from_micros(maximum))
    return to_micros(cost)


async def settle(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    hold: Hold,
    request_id: str,
    units: int | None,
) -> Redemption:
    """Settle an ``upto`` hold at what ``units`` cost; see :func:`..settle`."""
    amount = actual_amount(gate.resource, units)
    request_id = request_id or hold.request_id
    if amount == 0:
        return await _released(ctx, hold)
    if terms.sandbox:
        try:
            headers = await anyio.to_thread.run_sync(
                _settle_on_sandbox, ctx, gate, terms, hold, amount, units, request_id
            )
        except HoldNotFound:
            raise
        except (Refused, chain.ChainError) as refused:  # rolled back: nothing moved
            return await settlement_refused(ctx, request_id, hold, refused.message)
        except Exception as exc:  # rolled back: nothing moved, the hold is still there
            log.exception("settling upto hold %s for %s failed", hold.claim, hold.resource_id)
            why = f"settlement failed ({exc})"
            return await settlement_refused(ctx, request_id, hold, why)
    else:
        done = await _settle_live(ctx, gate, terms, hold, amount, units, request_id)
        if isinstance(done, Redemption):
            return done
        headers = done
    verified = await anyio.to_thread.run_sync(verification, ctx, gate.resource.id, hold.receipt_id)
    return Redemption(
        paid=True,
        rail=hold.rail,
        receipt_id=hold.receipt_id,
        verification=verified,
        headers=headers,
        payer=hold.payer,
    )


async def _released(ctx: ServerContext, hold: Hold) -> Redemption:
    """No usage: release the hold, nothing moves and nothing failed (no event)."""

    def drop() -> bool:
        with ctx.db.write() as conn:
            if not take_hold(conn, hold.claim):
                return False
            free_claim(conn, hold)
        return True

    if not await anyio.to_thread.run_sync(drop):
        raise HoldNotFound(hold.claim)
    return Redemption(
        paid=False,
        rail=hold.rail,
        reason="released",
        message="no usage was reported (units 0): the hold was released, nothing was charged",
        payer=hold.payer,
    )


def _settle_on_sandbox(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    hold: Hold,
    amount: int,
    units: int | None,
    request_id: str,
) -> list[tuple[str, str]]:
    """Take the hold, move ``amount`` and book it: one transaction, all or nothing."""
    with writing(ctx.db, ctx.notify_new_events) as conn:
        if not take_hold(conn, hold.claim):
            raise HoldNotFound(hold.claim)
        parsed = upto.parse_request(_body(hold.payload, {**hold.request, "amount": str(amount)}))
        tx = upto.execute(conn, parsed, now=ctx.now())
        if tx is None:  # only zero moves nothing, and zero never comes here
            raise chain.ChainError("invalid_upto_evm_payload", "nothing was settled")
        _book(conn, ctx, gate, terms, hold, tx.hash, amount, units, request_id)
        headers = receipt_headers(hold, terms, tx.hash, hold.payer, amount)
        record_settled(conn, hold, tx.hash, headers, ctx.now())
    return headers


def _book(
    conn: Any,
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    hold: Hold,
    tx_hash: str,
    amount: int,
    units: int | None,
    request_id: str,
) -> str:
    receipt_id = credit(
        conn,
        resource=gate.resource,
        seller=gate.seller,
        terms=terms,
        rail=hold.rail,
        tx_hash=tx_hash,
        payer=hold.payer,
        amount=amount,
        fee_bps=ctx.settings.platform_fee_bps,
        request_id=request_id,
        now=ctx.now(),
        receipt_id=hold.receipt_id,
    )
    mark_metered(
        conn,
        receipt_id,
        units=units,
        max_amount=int(gate.resource.amount_micros),
        now=ctx.now(),
    )
    return receipt_id


async def _settle_live(
    ctx: ServerContext,
    gate: Gate,
    terms: RailTerms,
    hold: Hold,
    amount: int,
    units: int | None,
    request_id: str,
) -> list[tuple[str, str]] | Redemption:
    """The facilitator settles ``amount`` (the requirements' amount, x402 ``upto``); then
    booked, keyed on its transaction.  Its outcome unknown: kept for an operator."""

    def take() -> bool:
        with ctx.db.write() as conn:
            return take_hold(conn, hold.claim)

    if not await anyio.to_thread.run_sync(take):
        raise HoldNotFound(hold.claim)
    actual = {**hold.request, "amount": str(amount)}
    async with facilitator_http(terms) as http:
        facilitator = HttpFacilitator(terms.facilitator_url or "", client=http)
        try:
            settled = await facilitator.settle(hold.payload, actual)  # type: ignore[arg-type]
        except FacilitatorError as exc:  # it may have broadcast: not safe to free
            await anyio.to_thread.run_sync(save_unsettled, ctx.db, hold, ctx.now())
            raise SettlementUnavailable(f"{exc}; its outcome is left to the chain") from exc
    if not settled.get("success"):
        why = settled.get("errorMessage") or settled.get("errorReason") or "settlement failed"
        return await settlement_refused(ctx, request_id, hold, str(why), taken=True)
    tx_hash = str(settled["transaction"])

    def book() -> list[tuple[str, str]]:
        headers = receipt_headers(hold, terms, tx_hash, hold.payer, amount)
        try:
            with writing(ctx.db, ctx.notify_new_events) as conn:
                _book(conn, ctx, gate, terms, hold, tx_hash, amount, units, request_id)
                record_settled(conn, hold, tx_hash, headers, ctx.now())
        except IntegrityError:  # booked concurrently: the receipt exists now
            with ctx.db.read() as conn:
                if receipt_for_transaction(conn, gate.resource.environment, tx_hash) is None:
                    raise
        return headers

    try:
        return await anyio.to_thread.run_sync(book)
    except Exception as exc:
        raise SettlementUnavailable(
            f"the upto payment {tx_hash} of {format_micros(amount)} settled but could not be booked"
        ) from exc

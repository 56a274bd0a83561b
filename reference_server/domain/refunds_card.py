"""Card refunds: the money goes back the way it came in, to the processor's clearing
account (:func:`~reference_server.domain.card_payments.book_card_sale` took it from
there), and the processor gives it back to the card.

In ``test`` the sandbox processor refunds at once: the transfers are posted in the
refund's transaction.  In ``live`` the refund's transaction only *holds* the seller's
share and the fee's (pending transfers, so the seller's available balance cannot be spent
twice meanwhile) and answers ``pending``; the worker then asks the processor for the
refund through the official SDK (:func:`advance_due`), outside any transaction, so no row
stays locked across the network, under an idempotency key derived from our refund id: a
second worker, a retry or a worker restarted mid-call asks for the same refund, never a
second one.  The processor answering ``succeeded`` posts the holds; ``pending``, its event
(``refund.updated`` / ``charge.refunded``) later posts them (:func:`settle`); ``failed``,
a refusal, or the processor taken away since voids them and gives the receipt its
refundable amount back.  Unreachable, it is asked again later.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import attrs
import stripe
from sqlalchemy import Connection, Row, and_, or_, select, update

from ..processor.client import stripe_client, uses_stripe
from ..settings import Settings
from ..store import tables as t
from ..telemetry import span
from ..timeutil import as_utc
from . import ledger
from .card_payments import CARD_RAIL
from .errors import DomainError
from .events import NEW_DELIVERIES
from .refund_shares import move_shares
from .refunds_chain import Announce, lease_due, locked_pending

if TYPE_CHECKING:
    from ..context import ServerContext

__all__ = ["CardRefund", "advance_due", "refund", "settle", "stripe_status"]

log = logging.getLogger("reference_server.refunds")
_f = t.refunds
_r = t.receipts
_cc = t.card_checkouts
_tr = t.ledger_transfers
Status = Literal["succeeded", "pending", "failed"]
#: The processor's refund statuses, as ours: ``requires_action`` waits like ``pending``.
_STATUS: dict[str, Status] = {
    "succeeded": "succeeded",
    "pending": "pending",
    "requires_action": "pending",
    "failed": "failed",
    "canceled": "failed",
}
#: How long a worker holds a refund it is asking the processor for (others leave it alone
#: meanwhile; one that stopped mid-call leaves it to be asked again, under the same key).
_LEASE = timedelta(minutes=2)
#: How long a refund waits to be asked again when the processor could not be reached.
_RETRY = timedelta(seconds=30)
#: The processor forgets an idempotency key after 24 hours: a refund still unanswered
#: this long after it was made is first looked for among its PaymentIntent's refunds (by
#: our id in its metadata), so a call that reached the processor is never made twice.
_KEY_TRUSTED = timedelta(hours=12)
_UNCONFIGURED = (
    "Card refunds in live need the card processor (SVC_PROCESSOR=stripe and its keys); "
    "nothing was refunded."
)


@attrs.frozen
class CardRefund:
    """What a card refund did: its seller transfer, and its status (``pending`` in live
    until the processor has answered)."""

    transfer_id: str
    status: Status


def stripe_status(value: object) -> Status | None:
    """Our status for the processor's refund status (``None``: not one we know)."""
    return _STATUS.get(value) if isinstance(value, str) else None


def refund(
    conn: Connection,
    receipt: Row[Any],
    amount: int,
    *,
    fee_back: int,
    fees: str | None,
    refund_id: str,
    settings: Settings | None,
    now: datetime,
) -> CardRefund:
    """Move ``amount`` back to the processor's clearing account (``fee_back`` of it from
    the fee shard ``fees``, the rest from the seller's balance): at once in test, held for
    the worker's call to the processor in live (see the module).  What the processor would
    refuse for certain (no PaymentIntent of ours, a fraction of a cent) is refused here."""
    env = receipt.environment
    live = env != "test"
    if live:
        if settings is None or not uses_stripe(settings, env):
            raise DomainError("settlement_unavailable", _UNCONFIGURED)
        _intent_of(conn, receipt)
        _cents(amount)
    seller = ledger.find_accounts(
        conn, environment=env, named=[(ledger.SELLER_BALANCE, receipt.seller_id)], now=now
    )[0]
    clearing = ledger.ensure_account(
        conn, environment=env, kind=ledger.PROCESSOR_CLEARING, ref_id=ledger.PLATFORM, now=now
    )
    # Live holds touch the debit accounts only: the clearing account every card sale
    # moves is not locked until the processor has answered (the post moves it then).
    locked = (seller, fees) if live else (seller, clearing, fees)
    ledger.lock_accounts(conn, [a for a in locked if a is not None])
    # ledger.InsufficientFunds goes up to refunds.refund, which says it as the ledger
    # rail does.
    transfer_id = move_shares(
        conn,
        receipt,
        amount,
        fee_back=fee_back,
        fees=fees,
        seller=seller,
        to=clearing,
        hold=live,
        now=now,
        reference=refund_id,
    )
    return CardRefund(transfer_id=transfer_id, status="pending" if live else "succeeded")


def _intent_of(conn: Connection, receipt: Row[Any]) -> str:
    """The PaymentIntent the receipt was paid with (on the Checkout row that booked it)."""
    intent = conn.execute(
        select(_cc.c.payment_intent).where(_cc.c.receipt_id == receipt.id)
    ).scalar()
    if not isinstance(intent, str):
        raise DomainError(
            "refund_unsupported_rail",
            f"Receipt {receipt.id} has no PaymentIntent of ours at the card processor.",
        )
    return intent


def _cents(amount: int) -> int:
    cents, rest = divmod(amount, 10_000)
    if rest:
        raise DomainError(
            "validation_error",
            "A card refund is in whole cents; this amount has a fraction of a cent.",
            details={"errors": [{"field": "amount", "message": "must be whole cents"}]},
        )
    return cents


@attrs.frozen
class _Answer:
    """The processor's word on a refund asked for: its id and status, or why it failed
    (``status`` ``failed``); ``status`` ``None``: it could not be reached."""

    status: Status | None
    processor_refund_id: str | None = None
    failure: str | None = None


def advance_due(ctx: ServerContext, announce: Announce) -> bool:
    """Ask the processor for each live card refund that is due (one trace each, naming the
    request that asked for it) and record its answer; ``True`` when events were
    recorded."""

    def claim() -> list[Any]:
        with ctx.db.write() as conn:
            return _claim_due(conn, ctx.now(), ctx.settings.worker_batch_size)

    queued = False
    for row in claim():
        names = {"svc.refund_id": row.id, "svc.origin_request_id": row.request_id}
        with span("card refund", **names):
            answer = _ask(ctx.settings, row, ctx.now())
            with ctx.db.write() as conn:
                _record(conn, row.id, answer, ctx.now(), announce)
                queued = bool(conn.info.pop(NEW_DELIVERIES, False)) or queued
    return queued


def _claim_due(conn: Connection, now: datetime, limit: int) -> list[Any]:
    """The live card refunds not yet asked for whose turn it is, each leased for
    :data:`_LEASE` (its ``next_check_at`` moved on) so that one worker asks at a time."""
    query = (
        select(
            _f.c.id,
            _f.c.receipt_id,
            _f.c.amount_micros,
            _f.c.request_id,
            _f.c.created_at,
            _cc.c.payment_intent,
        )
        .select_from(_f.join(_r, _r.c.id == _f.c.receipt_id).join(_cc, _cc.c.receipt_id == _r.c.id))
        .where(
            _f.c.environment == "live",
            _r.c.rail == CARD_RAIL,
            _f.c.status == "pending",
            _f.c.processor_refund_id.is_(None),
            _f.c.next_check_at <= now,
        )
        .order_by(_f.c.next_check_at)
        .limit(limit)
    )
    return lease_due(conn, query, now, _LEASE)


def _ask(settings: Settings, row: Any, now: datetime) -> _Answer:
    """The processor's refund of the row's amount of its PaymentIntent, created once per
    refund id (the key, or past :data:`_KEY_TRUSTED` our id in its metadata), asked with
    no transaction open."""
    if not uses_stripe(settings, "live") or settings.stripe_secret_key is None:
        return _Answer("failed", failure="The card processor is no longer configured here.")
    client = stripe_client(settings)
    try:
        if now - as_utc(row.created_at) > _KEY_TRUSTED:
            made = _made_already(client, row)
            if made is not None:
                return made
        answer = client.v1.refunds.create(
            params={
                "payment_intent": row.payment_intent,
                "amount": int(row.amount_micros) // 10_000,
                "metadata": {"svc_refund_id": row.id, "svc_receipt_id": row.receipt_id},
            },
            options={"idempotency_key": f"svc-refund-{row.id}"},
        )
    except stripe.InvalidRequestError as exc:
        reason = f"The card processor refused the refund: {exc.user_message or exc}"
        return _Answer("failed", failure=reason)
    except stripe.StripeError as exc:
        log.warning("refund %s: the card processor did not answer: %s", row.id, exc)
        return _Answer(None)
    return _Answer(stripe_status(answer.status) or "pending", processor_refund_id=str(answer.id))


def _made_already(client: stripe.StripeClient, row: Any) -> _Answer | None:
    """The processor's refund made for ours already, if its PaymentIntent lists one."""
    listed = client.v1.refunds.list(params={"payment_intent": row.payment_intent, "limit": 100})
    for made in listed.auto_paging_iter():
        metadata = made.to_dict().get("metadata") or {}
        if metadata.get("svc_refund_id") == row.id:
            return _Answer(stripe_status(made.status) or "pending", processor_refund_id=made.id)
    return None


def _record(
    conn: Connection, refund_id: str, answer: _Answer, now: datetime, announce: Announce
) -> None:
    row = locked_pending(conn, refund_id)
    if row is None:  # decided meanwhile (by the processor's event)
        return
    if answer.status is None:
        conn.execute(update(_f).where(_f.c.id == refund_id).values(next_check_at=now + _RETRY))
        return
    if answer.status == "pending":  # its event decides it
        conn.execute(
            update(_f)
            .where(_f.c.id == refund_id)
            .values(processor_refund_id=answer.processor_refund_id, next_check_at=None)
        )
        return
    decided = _decide(
        conn,
        row,
        answer.status,
        now,
        processor_refund_id=answer.processor_refund_id,
        failure=answer.failure,
    )
    receipt = conn.execute(select(_r).where(_r.c.id == row.receipt_id)).one()
    announce(conn, receipt, decided, now)


def settle(
    conn: Connection,
    processor_refund_id: str,
    status: Status,
    now: datetime,
    *,
    refund_id: str | None = None,
) -> Row[Any] | None:
    """Apply the processor's word on a pending card refund: ``succeeded`` posts its
    holds, ``failed`` voids them and lowers the receipt's refunded amount again.  Returns
    the refund's row when it changed (``None``: not ours, or decided already).
    ``refund_id``: ours, from the processor refund's metadata, which finds it when the
    event comes before the worker has recorded the processor's answer."""
    if status == "pending":
        return None
    found = _f.c.processor_refund_id == processor_refund_id
    if refund_id is not None:
        found = or_(found, and_(_f.c.id == refund_id, _f.c.processor_refund_id.is_(None)))
    row = conn.execute(select(_f).where(found).with_for_update()).first()
    if row is None or row.status != "pending":
        return None
    return _decide(conn, row, status, now, processor_refund_id=processor_refund_id)


def _decide(
    conn: Connection,
    row: Row[Any],
    status: Status,
    now: datetime,
    *,
    processor_refund_id: str | None,
    failure: str | None = None,
) -> Row[Any]:
    """Conclude a pending refund: its status, the processor's id, why it failed; its
    holds posted or voided, and a failed one's amount refundable again."""
    values: dict[str, Any] = {"status": status, "next_check_at": None}
    if processor_refund_id is not None:
        values["processor_refund_id"] = processor_refund_id
    if status == "failed":
        values["failure_reason"] = (failure or "The card processor failed the refund.")[:500]
        conn.execute(
            update(_r)
            .where(_r.c.id == row.receipt_id)
            .values(refunded_micros=_r.c.refunded_micros - row.amount_micros)
        )
    conn.execute(update(_f).where(_f.c.id == row.id).values(**values))
    _post_or_void(conn, row.id, status, now)
    return conn.execute(select(_f).where(_f.c.id == row.id)).one()


def _post_or_void(conn: Connection, refund_id: str, status: Status, now: datetime) -> None:
    held = conn.execute(
        select(_tr.c.id)
        .where(_tr.c.reference == refund_id, _tr.c.status == "pending")
        .order_by(_tr.c.id)
    ).scalars()
    for transfer_id in held:
        if status == "succeeded":
            ledger.post(conn, transfer_id, now)
        else:
            ledger.void(conn, transfer_id, now)

"""Card refunds: the money goes back the way it came in, to the processor's clearing
account (:func:`~reference_server.domain.card_payments.book_card_sale` took it from
there), and the processor gives it back to the card.

In ``test`` the sandbox processor refunds at once: the transfers are posted in the
refund's transaction.  In ``live`` the seller's share and the fee's are *held* (pending
transfers, so the seller's available balance cannot be spent twice meanwhile) and the
processor's refund is created through the official SDK, last in the transaction, under
an idempotency key derived from our refund id: a retried transaction or request asks for
the same refund, never a second one.  The processor answering ``succeeded`` posts the
holds at once; ``pending``, its event (``refund.updated`` / ``charge.refunded``) later
posts them (:func:`settle`) or, ``failed``, voids them and gives the receipt its
refundable amount back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import attrs
import stripe
from sqlalchemy import Connection, Row, select, update

from ..processor.client import stripe_client, uses_stripe
from ..settings import Settings
from ..store import tables as t
from . import ledger
from .errors import DomainError
from .refund_shares import move_shares

__all__ = ["CardRefund", "refund", "settle", "stripe_status"]

_f = t.refunds
_r = t.receipts
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


@attrs.frozen
class CardRefund:
    """What a card refund did: its seller transfer, its status, the processor's id."""

    transfer_id: str
    status: Status
    processor_refund_id: str | None = None


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
    the fee shard ``fees``, the rest from the seller's balance) and, in live, ask the
    processor to refund it (see the module)."""
    env = receipt.environment
    processor = None if env == "test" else settings
    if env != "test" and (settings is None or not uses_stripe(settings, env)):
        raise DomainError(
            "settlement_unavailable",
            "Card refunds in live need the card processor (SVC_PROCESSOR=stripe and its "
            "keys); nothing was refunded.",
        )
    seller = ledger.find_accounts(
        conn, environment=env, named=[(ledger.SELLER_BALANCE, receipt.seller_id)], now=now
    )[0]
    clearing = ledger.ensure_account(
        conn, environment=env, kind=ledger.PROCESSOR_CLEARING, ref_id=ledger.PLATFORM, now=now
    )
    # Live holds touch the debit accounts only: the clearing account every card sale
    # moves is not locked across the processor's call (the post moves it after).
    locked = (seller, fees) if processor is not None else (seller, clearing, fees)
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
        hold=processor is not None,
        now=now,
        reference=refund_id,
    )
    if processor is None:
        return CardRefund(transfer_id=transfer_id, status="succeeded")
    processor_id, status = _ask_processor(conn, processor, receipt, amount, refund_id)
    if status == "failed":
        raise DomainError(
            "settlement_unavailable",
            "The card processor refused the refund; nothing was refunded.",
        )
    if status == "succeeded":
        _post_or_void(conn, refund_id, "succeeded", now)
    return CardRefund(transfer_id=transfer_id, status=status, processor_refund_id=processor_id)


def _ask_processor(
    conn: Connection, settings: Settings, receipt: Row[Any], amount: int, refund_id: str
) -> tuple[str, Status]:
    """The processor's refund of ``amount`` of the receipt's PaymentIntent (found on the
    Checkout row that booked it), created once per ``refund_id``."""
    cc = t.card_checkouts
    intent = conn.execute(select(cc.c.payment_intent).where(cc.c.receipt_id == receipt.id)).scalar()
    if not isinstance(intent, str):
        raise DomainError(
            "refund_unsupported_rail",
            f"Receipt {receipt.id} has no PaymentIntent of ours at the card processor.",
        )
    cents, rest = divmod(amount, 10_000)
    if rest:
        raise DomainError(
            "validation_error",
            "A card refund is in whole cents; this amount has a fraction of a cent.",
            details={"errors": [{"field": "amount", "message": "must be whole cents"}]},
        )
    try:
        answer = stripe_client(settings).v1.refunds.create(
            params={
                "payment_intent": intent,
                "amount": cents,
                "metadata": {"svc_refund_id": refund_id, "svc_receipt_id": receipt.id},
            },
            options={"idempotency_key": f"svc-refund-{refund_id}"},
        )
    except stripe.InvalidRequestError as exc:
        raise DomainError(
            "settlement_unavailable",
            f"The card processor refused the refund ({exc.user_message or exc}); nothing was "
            "refunded.",
        ) from None
    except stripe.StripeError as exc:
        raise DomainError(
            "settlement_unavailable",
            f"The card processor could not be reached ({exc.user_message or exc}); nothing "
            "was refunded here: retry with the same Idempotency-Key.",
        ) from None
    status = stripe_status(answer.status) or "pending"
    return str(answer.id), status


def settle(
    conn: Connection, processor_refund_id: str, status: Status, now: datetime
) -> Row[Any] | None:
    """Apply the processor's word on a pending card refund: ``succeeded`` posts its
    holds, ``failed`` voids them and lowers the receipt's refunded amount again.  Returns
    the refund's row when it changed (``None``: not ours, or decided already)."""
    if status == "pending":
        return None
    row = conn.execute(
        select(_f).where(_f.c.processor_refund_id == processor_refund_id).with_for_update()
    ).first()
    if row is None or row.status != "pending":
        return None
    conn.execute(update(_f).where(_f.c.id == row.id).values(status=status))
    if status == "failed":
        conn.execute(
            update(_r)
            .where(_r.c.id == row.receipt_id)
            .values(refunded_micros=_r.c.refunded_micros - row.amount_micros)
        )
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

"""Refunds (``POST /refunds``) and where a payment stands (``GET /payments/{id}``).

A seller gives back all or part of a payment it received, never more than was paid in
total: the receipt's ``refunded_micros`` rises under the receipt's row lock (PostgreSQL;
SQLite's write lock serialises) and by a conditional ``UPDATE`` that never passes the
amount, so concurrent partial refunds cannot over-refund.  On the ledger rail a refund is
a reversing transfer to the payer's wallet key, the key's policy given back what it
counted (within the period the payment was made in); the platform gives back its fee's
share of the part refunded, the seller's balance the rest.  The seller's balance never
goes below zero: a refund whose share is larger than its available balance is refused
(``insufficient_balance``), nothing moved.
A card payment's refund goes back through the processor (:mod:`.refunds_card`).  An
open-rail payment settled ``processor_deposit`` is refunded on chain, from the hot wallet
to the payer's address (:mod:`.refunds_chain`): ``pending`` until the worker has sent it,
its money held meanwhile.  A ``direct_wallet`` payment never passed through the service
(``refund_not_custodial``); anything else answers
(``refund_unsupported_rail``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio.to_thread
from sqlalchemy import Connection, Row, select, update

from svc import Payment, Refund, Role
from svc.money import format_micros, from_micros

from ..context import ServerContext
from ..ids import new_id
from ..settings import Settings
from ..store import tables as t
from ..timeutil import as_utc
from . import (
    ledger,
    metered,
    paging,
    refund_shares,
    refunds_card,
    refunds_chain,
    refunds_live,
    wallets,
)
from .card_payments import CARD_RAIL
from .errors import DomainError
from .events import record_event
from .open_rails import hold_of_receipt
from .principal import Principal
from .refund_shares import move_shares

__all__ = [
    "advance_refunds",
    "confirm_card_refund",
    "find_refund",
    "list_refunds",
    "payment",
    "refund",
    "refund_model",
]

_r = t.receipts
_f = t.refunds


def refund(
    conn: Connection,
    *,
    seller_id: str,
    environment: str,
    receipt_id: str,
    amount: int | None,
    reason: str | None,
    request_id: str,
    now: datetime,
    refund_id: str | None = None,
    settings: Settings | None = None,
) -> Row[Any]:
    """Give back ``amount`` (``None``: all that is left) of the seller's payment (see the
    module); returns the refund's row.  ``refund_id``: one derived from the request's
    Idempotency-Key (a card refund's processor key derives from it); ``settings``: the
    card processor's, for a live card refund."""
    receipt = _locked_receipt(conn, receipt_id, seller_id=seller_id, environment=environment)
    _check_refundable(receipt)
    if environment == "live" and refunds_chain.carries(receipt):
        missing = refunds_live.missing_setup(settings)
        if missing is not None:
            raise DomainError("settlement_unavailable", f"{missing}; nothing was refunded.")
    remaining = int(receipt.amount_micros - receipt.refunded_micros)
    amount = remaining if amount is None else amount
    if amount <= 0 or amount > remaining:
        raise DomainError(
            "refund_exceeds_payment",
            f"Receipt {receipt_id} has {format_micros(remaining)} left to refund.",
            details={"remaining": format_micros(remaining)},
        )
    counted = conn.execute(
        update(_r)
        .where(_r.c.id == receipt_id, _r.c.refunded_micros + amount <= _r.c.amount_micros)
        .values(refunded_micros=_r.c.refunded_micros + amount)
        .returning(_r.c.refunded_micros)
    ).scalar()
    if counted is None:  # cannot happen under the lock; the condition is the guarantee
        raise DomainError("refund_exceeds_payment", f"Receipt {receipt_id} is refunded.")
    refund_id = refund_id or new_id("rfnd")
    status = "succeeded"
    on_chain = refunds_chain.carries(receipt)
    if receipt.rail == CARD_RAIL:
        fee_back, fees = _fee_back(conn, receipt, amount, refunded=int(counted))
        try:
            card = refunds_card.refund(
                conn,
                receipt,
                amount,
                fee_back=fee_back,
                fees=fees,
                refund_id=refund_id,
                settings=settings,
                now=now,
            )
        except ledger.InsufficientFunds as e:
            raise _insufficient(e) from None
        transfer_id, status = card.transfer_id, card.status
    elif on_chain:
        transfer_id = _hold_on_chain(
            conn, receipt, amount, refunded=int(counted), refund_id=refund_id, now=now
        )
        status = "pending"
    else:
        transfer_id = _reverse(
            conn, receipt, amount, refunded=int(counted), refund_id=refund_id, now=now
        )
    row = {
        "id": refund_id,
        "environment": environment,
        "receipt_id": receipt_id,
        "seller_id": seller_id,
        "wallet_key_id": receipt.wallet_key_id,
        "amount_micros": amount,
        "reason": reason,
        "transfer_id": transfer_id,
        "status": status,
        "request_id": request_id,
        "created_at": now,
        # Pending (on chain, or a live card refund): the worker's from now on.
        "next_check_at": now if status == "pending" else None,
    }
    conn.execute(_f.insert().values(**row))
    if status == "succeeded":  # pending: announced once concluded (advance_refunds)
        _announce(conn, receipt, row, refunded=int(counted), now=now)
    return conn.execute(select(_f).where(_f.c.id == refund_id)).one()


def _locked_receipt(
    conn: Connection, receipt_id: str, *, seller_id: str, environment: str
) -> Row[Any]:
    """The seller's receipt under its row lock (one refund of it at a time); another
    seller's or environment's is ``not_found``."""
    row = conn.execute(
        select(_r)
        .where(_r.c.id == receipt_id, _r.c.seller_id == seller_id, _r.c.environment == environment)
        .with_for_update()
    ).first()
    if row is None:
        raise DomainError("not_found", f"No receipt {receipt_id} in {environment}.")
    return row


def _check_refundable(receipt: Row[Any]) -> None:
    if receipt.settlement == "direct_wallet":
        raise DomainError(
            "refund_not_custodial",
            f"Receipt {receipt.id} was paid to the seller's own wallet; refund it from there.",
        )
    if receipt.status != "settled":
        raise DomainError(
            "payment_not_settled", f"Receipt {receipt.id} is {receipt.status}: nothing to refund."
        )
    if receipt.rail == CARD_RAIL:
        return
    ledger_rail = receipt.rail == "rill" and receipt.wallet_key_id is not None
    if not ledger_rail and not refunds_chain.carries(receipt):
        raise DomainError(
            "refund_unsupported_rail",
            f"Refunds of {receipt.rail} ({receipt.settlement}) payments are not available yet.",
        )


def _reverse(
    conn: Connection,
    receipt: Row[Any],
    amount: int,
    *,
    refunded: int,
    refund_id: str,
    now: datetime,
) -> str:
    """The ledger's reversing transfers to the payer's wallet key: the platform's share of
    the fee back from the fee shard that took it (the fee times the part refunded, counted
    on the total so partial refunds add up to the whole fee), the rest from the seller's
    balance; and the key's policy given back ``amount``.  The key's lock first, as every
    payment takes it, then the accounts' in id order.  Returns the seller's transfer."""
    env = receipt.environment
    wallets.refund_charge(conn, receipt.wallet_key_id, amount, charged_at=receipt.created_at)
    seller, payer = ledger.find_accounts(
        conn,
        environment=env,
        named=[
            (ledger.SELLER_BALANCE, receipt.seller_id),
            (ledger.WALLET_KEY, receipt.wallet_key_id),
        ],
        now=now,
    )
    fee_back, fees = _fee_back(conn, receipt, amount, refunded=refunded)
    ledger.lock_accounts(conn, [a for a in (seller, payer, fees) if a is not None])
    try:
        return move_shares(
            conn,
            receipt,
            amount,
            fee_back=fee_back,
            fees=fees,
            seller=seller,
            to=payer,
            hold=False,
            now=now,
            wallet_key_id=receipt.wallet_key_id,
            reference=refund_id,
        )
    except ledger.InsufficientFunds as e:
        raise _insufficient(e) from None


def _hold_on_chain(
    conn: Connection,
    receipt: Row[Any],
    amount: int,
    *,
    refunded: int,
    refund_id: str,
    now: datetime,
) -> str:
    """The refund's money held for the chain (:func:`.refunds_chain.hold`), the fee's
    share counted as :func:`_reverse` counts it."""
    fee_back, fees = _fee_back(conn, receipt, amount, refunded=refunded)
    try:
        return refunds_chain.hold(
            conn, receipt, amount, fee_back=fee_back, fees=fees, refund_id=refund_id, now=now
        )
    except ledger.InsufficientFunds as e:
        raise _insufficient(e) from None


def _insufficient(e: ledger.InsufficientFunds) -> DomainError:
    return DomainError(
        "insufficient_balance",
        f"The seller's available balance {format_micros(e.available)} is below its "
        f"share of the refund, {format_micros(e.needed)}; nothing was refunded.",
        details={"available": format_micros(e.available), "needed": format_micros(e.needed)},
    )


def _fee_back(
    conn: Connection, receipt: Row[Any], amount: int, *, refunded: int
) -> tuple[int, str | None]:
    """The fee's share given back with ``amount`` (:func:`.refund_shares.fee_back`) and
    the fee shard that took it (``None`` when there is nothing to give back)."""
    back = refund_shares.fee_back(receipt, amount, refunded=refunded)
    return back, _fee_account(conn, receipt) if back else None


async def advance_refunds(ctx: ServerContext) -> bool:
    """The worker's round of pending refunds: on chain, ``test``'s on the sandbox chain
    (:func:`.refunds_chain.advance_due`) and ``live``'s through the facilitator
    (:mod:`.refunds_live`); live card refunds asked of the processor
    (:func:`.refunds_card.advance_due`); each announced once it succeeded or failed.
    ``True`` when events were recorded."""
    sandbox = await anyio.to_thread.run_sync(lambda: refunds_chain.advance_due(ctx, _concluded))
    cards = await anyio.to_thread.run_sync(lambda: refunds_card.advance_due(ctx, _concluded))
    return await refunds_live.advance_live(ctx, _concluded) or sandbox or cards


def _concluded(conn: Connection, receipt: Row[Any], row: Row[Any], now: datetime) -> None:
    """``payment.refunded`` or ``payment.refund_failed`` of a pending refund, once its
    outcome is known."""
    _announce(conn, receipt, dict(row._mapping), refunded=int(receipt.refunded_micros), now=now)


def _fee_account(conn: Connection, receipt: Row[Any]) -> str:
    """The platform-fee shard the payment's fee went to."""
    tr = t.ledger_transfers
    return str(
        conn.execute(
            select(tr.c.credit_account_id).where(
                tr.c.receipt_id == receipt.id, tr.c.kind == "platform_fee"
            )
        ).scalar_one()
    )


def _announce(
    conn: Connection, receipt: Row[Any], refund_row: dict[str, Any], *, refunded: int, now: datetime
) -> None:
    """``payment.refunded`` (or, for a pending refund that failed and put the money back,
    ``payment.refund_failed`` with its reason) for the seller's owner and, when another,
    the payer's."""
    failed = refund_row["status"] == "failed"
    data = {
        "receipt_id": receipt.id,
        "refund_id": refund_row["id"],
        "amount": format_micros(refund_row["amount_micros"]),
        "refunded": format_micros(refunded),
        "remaining": format_micros(int(receipt.amount_micros) - refunded),
        "reason": refund_row["reason"],
        "rail": receipt.rail,
        "seller_id": receipt.seller_id,
        "wallet_key_id": receipt.wallet_key_id,
        "environment": receipt.environment,
    }
    if refund_row.get("tx_hash"):
        data["tx_hash"] = refund_row["tx_hash"]
    if failed:
        data["failure_reason"] = refund_row.get("failure_reason") or "The refund failed."
    owners = conn.execute(
        select(t.sellers.c.owner_id)
        .where(t.sellers.c.id == receipt.seller_id)
        .union(select(t.wallet_keys.c.owner_id).where(t.wallet_keys.c.id == receipt.wallet_key_id))
    ).scalars()
    for owner_id in sorted(set(owners)):
        record_event(
            conn,
            owner_id=owner_id,
            environment=receipt.environment,
            type="payment.refund_failed" if failed else "payment.refunded",
            data=data,
            now=now,
        )


def confirm_card_refund(
    conn: Connection,
    processor_refund_id: str,
    status: refunds_card.Status,
    now: datetime,
    *,
    refund_id: str | None = None,
) -> None:
    """The processor's word on a pending card refund (its events): ``succeeded`` books it
    and announces ``payment.refunded``; ``failed`` puts the money back and announces
    ``payment.refund_failed``.  ``refund_id``: ours, from its metadata."""
    row = refunds_card.settle(conn, processor_refund_id, status, now, refund_id=refund_id)
    if row is None:
        return
    receipt = conn.execute(select(_r).where(_r.c.id == row.receipt_id)).one()
    _announce(conn, receipt, row._asdict(), refunded=int(receipt.refunded_micros), now=now)


def list_refunds(conn: Connection, request: paging.PageRequest, *, seller_id: str) -> paging.Page:
    """The seller's refunds, newest first."""
    return paging.page(
        conn, request, select(_f), table=_f, scope=[_f.c.seller_id == seller_id], order="desc"
    )


def find_refund(conn: Connection, refund_id: str, *, seller_id: str) -> Row[Any]:
    row = conn.execute(select(_f).where(_f.c.id == refund_id, _f.c.seller_id == seller_id)).first()
    if row is None:
        raise DomainError("not_found", f"No refund {refund_id}.")
    return row


def refund_model(row: Row[Any]) -> Refund:
    return Refund(
        id=row.id,
        receipt_id=row.receipt_id,
        amount=from_micros(row.amount_micros),
        status=row.status,
        reason=row.reason,
        tx_hash=row.tx_hash,
        failure_reason=row.failure_reason,
        seller_id=row.seller_id,
        environment=row.environment,
        created_at=as_utc(row.created_at),
    )


def payment(conn: Connection, receipt_id: str, caller: Principal) -> Payment:
    """``GET /payments/{id}``: where the payment stands, for its payer, its seller or the
    owner of either (anyone else ``not_found``).  A receipt a gate's open-rail hold
    reserved, not settled yet, is ``claimed`` to its seller's side."""
    row = metered.readable_row(conn, receipt_id, caller)
    if row is None:
        return _claimed(conn, receipt_id, caller)
    paid, refunded = int(row.amount_micros), int(row.refunded_micros)
    state = {"authorized": "claimed", "released": "released"}.get(row.status, "settled")
    return Payment(
        receipt_id=row.id,
        state="refunded" if refunded else state,
        amount=from_micros(paid),
        refunded=from_micros(refunded),
        remaining=from_micros(paid - refunded if state == "settled" else 0),
        rail=row.rail,
        settlement=row.settlement,
        resource_id=row.resource_id,
        environment=row.environment,
        created_at=as_utc(row.created_at),
    )


def _claimed(conn: Connection, receipt_id: str, caller: Principal) -> Payment:
    hold = hold_of_receipt(conn, receipt_id)
    if hold is None or hold.environment != caller.environment or not _sells(conn, hold, caller):
        raise DomainError("not_found", f"No payment {receipt_id} in {caller.environment}.")
    # What the gate charges (for a metered resource, its maximum): settled, the receipt
    # says what was paid.
    price = conn.execute(
        select(t.resources.c.amount_micros).where(t.resources.c.id == hold.resource_id)
    ).scalar()
    return Payment(
        receipt_id=receipt_id,
        state="claimed",
        amount=from_micros(int(price or 0)),
        rail=hold.rail,
        resource_id=hold.resource_id,
        environment=hold.environment,
        created_at=None if hold.created_at is None else as_utc(hold.created_at),
    )


def _sells(conn: Connection, hold: Any, caller: Principal) -> bool:
    """Whether ``caller`` is the hold's seller or its owner (an open-rail payer has no
    key of ours: only the seller's side can see a hold)."""
    if caller.role is Role.SELLER:
        return bool(caller.subject_id == hold.seller_id)
    if caller.role is Role.OWNER:
        owner = conn.execute(
            select(t.sellers.c.owner_id).where(t.sellers.c.id == hold.seller_id)
        ).scalar()
        return bool(owner == caller.owner_id)
    return False

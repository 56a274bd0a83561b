"""What the outbox worker runs for payouts (``outbox/worker.py``), from the database alone
so that it survives restarts and any number of workers may run:

* :func:`advance_due` -- each active withdrawal whose check is due: create its payout at
  the processor, then follow the payout's status; ``paid`` posts the held transfer and
  records ``withdrawal.paid``, ``failed`` voids it (the money is back) and records
  ``withdrawal.failed``;
* :func:`start_auto_payouts` -- a seller with payouts enabled, auto payout on, no
  withdrawal in flight and an available balance at its minimum is paid out whole.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, and_, exists, func, select, update

from svc.money import format_micros

from ...settings import Settings
from ...store import Database
from ...store import tables as t
from ...telemetry import span
from .. import ledger
from ..errors import DomainError
from ..events import NEW_DELIVERIES, record_event
from . import processor_for
from .connect import account_of, effective_minimum
from .processor import PayoutProcessor, PayoutStatus
from .withdrawals import ACTIVE, withdraw

__all__ = ["advance_due", "conclude", "run_payouts", "start_auto_payouts"]

_w = t.withdrawals
_pa = t.payout_accounts
_a = t.ledger_accounts


def run_payouts(db: Database, settings: Settings, clock: Callable[[], datetime]) -> bool:
    """One round of both; ``True`` when it recorded events (deliveries are due)."""
    queued = advance_due(db, settings, clock, limit=settings.worker_batch_size)
    return start_auto_payouts(db, settings, clock, limit=settings.worker_batch_size) or queued


#: A remote processor's payout is followed by its events; this poll is the fallback.
_REMOTE_POLL = timedelta(hours=1)


def _check_delay(settings: Settings) -> timedelta:
    """How long until the processor is asked again about a payout in flight."""
    return timedelta(seconds=min(60.0, max(0.2, settings.sandbox_payout_seconds / 2)))


def advance_due(
    db: Database, settings: Settings, clock: Callable[[], datetime], *, limit: int
) -> bool:
    now = clock()
    with db.read() as conn:
        due = conn.execute(
            select(_w.c.id, _w.c.environment, _w.c.request_id)
            .where(_w.c.status.in_(ACTIVE), _w.c.next_check_at <= now)
            .order_by(_w.c.next_check_at)
            .limit(limit)
        ).all()
    queued = False
    for withdrawal_id, environment, request_id in due:
        processor = processor_for(settings, environment, public_url=settings.public_url or "")
        # A trace of its own per step (its processor calls inside), naming the request
        # that asked for the withdrawal.
        names = {"svc.withdrawal_id": withdrawal_id, "svc.origin_request_id": request_id}
        with span("withdrawal step", **names):
            if processor.remote:
                queued = _advance_remote(db, processor, withdrawal_id, settings, clock) or queued
                continue
            with db.write() as conn:
                _advance_one(conn, processor, withdrawal_id, settings, clock())
                queued = bool(conn.info.pop(NEW_DELIVERIES, False)) or queued
    return queued


def _due(conn: Connection, withdrawal_id: str, now: datetime) -> Row[Any] | None:
    query = select(_w).where(
        _w.c.id == withdrawal_id, _w.c.status.in_(ACTIVE), _w.c.next_check_at <= now
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return conn.execute(query).first()


def _advance_one(
    conn: Connection,
    processor: PayoutProcessor,
    withdrawal_id: str,
    settings: Settings,
    now: datetime,
) -> None:
    """The sandbox: its state is rows here, so it is asked inside the transaction."""
    row = _due(conn, withdrawal_id, now)
    if row is None:  # advanced meanwhile by another worker
        return
    try:
        payout_id, status = _ask(conn, processor, account_of(conn, row.seller_id), row, now)
    except DomainError as exc:
        conclude(conn, row, "failed", exc.message, now)
        return
    delay = _check_delay(settings)
    if status is None:
        _set(conn, row, now, processor_payout_id=payout_id, next_check_at=now + delay)
    else:
        _follow(conn, row, status, delay, now)


def _ask(
    conn: Connection | None,
    processor: PayoutProcessor,
    account: Row[Any] | None,
    row: Row[Any],
    now: datetime,
) -> tuple[str | None, PayoutStatus | None]:
    """Create the withdrawal's payout at the processor or, once created, ask its status:
    the one question both the sandbox (inside a transaction) and a remote processor (with
    no ``conn``) are asked."""
    if account is None:
        raise DomainError("payouts_not_enabled", "The seller has no payout account.")
    if row.processor_payout_id is None:
        payout_id = processor.create_payout(
            conn,
            account.processor_account_id,
            amount_micros=row.amount_micros,
            reference=row.id,
            now=now,
        )
        return payout_id, None
    return None, processor.payout_status(
        conn, account.processor_account_id, row.processor_payout_id, now=now
    )


def _advance_remote(
    db: Database,
    processor: PayoutProcessor,
    withdrawal_id: str,
    settings: Settings,
    clock: Callable[[], datetime],
) -> bool:
    """A processor behind the network, asked outside any transaction (no lock waits on
    it); what it answered is then written if the withdrawal is still where it was.  Its
    calls are idempotent by withdrawal id, so two workers asking at once pay once."""
    now = clock()
    with db.read() as conn:
        row = _due(conn, withdrawal_id, now)
        account = None if row is None else account_of(conn, row.seller_id)
    if row is None:
        return False
    payout_id: str | None = None
    status: PayoutStatus | None = None
    failure: str | None = None
    try:
        payout_id, status = _ask(None, processor, account, row, now)
    except DomainError as exc:
        if exc.code != "processor_unavailable":
            failure = exc.message
    now = clock()
    with db.write() as conn:
        fresh = _due(conn, withdrawal_id, now)
        if fresh is None or fresh.processor_payout_id != row.processor_payout_id:
            return False  # concluded by its event meanwhile, or advanced by another worker
        if failure is not None:
            conclude(conn, fresh, "failed", failure, now)
        elif payout_id is not None:
            _set(conn, fresh, now, processor_payout_id=payout_id, next_check_at=now + _REMOTE_POLL)
        elif status is not None:
            _follow(conn, fresh, status, _REMOTE_POLL, now)
        else:  # unreachable: pending, asked again soon
            _set(conn, fresh, now, next_check_at=now + _check_delay(settings))
        return bool(conn.info.pop(NEW_DELIVERIES, False))


def _follow(
    conn: Connection, row: Row[Any], status: PayoutStatus, delay: timedelta, now: datetime
) -> None:
    if status.status in ("paid", "failed"):
        conclude(conn, row, status.status, status.failure_reason, now)
    else:
        _set(conn, row, now, status=status.status, next_check_at=now + delay)


def _set(conn: Connection, row: Row[Any], now: datetime, **values: Any) -> None:
    conn.execute(update(_w).where(_w.c.id == row.id).values(updated_at=now, **values))


def conclude(
    conn: Connection, row: Row[Any], status: str, reason: str | None, now: datetime
) -> None:
    """Paid: the held money moves out.  Failed: it is released back to the balance."""
    if status == "paid":
        ledger.post(conn, row.transfer_id, now)
    else:
        ledger.void(conn, row.transfer_id, now)
    _set(conn, row, now, status=status, failure_reason=reason, next_check_at=None)
    owner_id = conn.execute(
        select(t.sellers.c.owner_id).where(t.sellers.c.id == row.seller_id)
    ).scalar_one()
    data: dict[str, Any] = {
        "withdrawal_id": row.id,
        "seller_id": row.seller_id,
        "amount": format_micros(row.amount_micros),
        "status": status,
        "environment": row.environment,
    }
    if status == "failed":
        data["reason"] = reason
    record_event(
        conn,
        owner_id=owner_id,
        environment=row.environment,
        type=f"withdrawal.{status}",
        data=data,
        now=now,
    )


def start_auto_payouts(
    db: Database, settings: Settings, clock: Callable[[], datetime], *, limit: int
) -> bool:
    """Start one withdrawal of the whole available balance for each seller that is due."""
    minimum = func.coalesce(_pa.c.auto_payout_minimum_micros, settings.auto_payout_minimum_micros)
    in_flight = exists().where(_w.c.seller_id == _pa.c.seller_id, _w.c.status.in_(ACTIVE))
    query = (
        select(_pa.c.seller_id)
        .join(
            _a,
            and_(
                _a.c.environment == _pa.c.environment,
                _a.c.kind == ledger.SELLER_BALANCE,
                _a.c.ref_id == _pa.c.seller_id,
            ),
        )
        .where(
            _pa.c.payouts_enabled.is_(True),
            _pa.c.auto_payout.is_(True),
            minimum > 0,
            _a.c.balance_micros - _a.c.pending_debit_micros >= minimum,
            ~in_flight,
        )
        .limit(limit)
    )
    with db.read() as conn:
        due = conn.execute(query).scalars().all()
    queued = False
    for seller_id in due:
        with db.write() as conn:
            _auto_payout(conn, seller_id, settings, clock())
            queued = bool(conn.info.pop(NEW_DELIVERIES, False)) or queued
    return queued


def _auto_payout(conn: Connection, seller_id: str, settings: Settings, now: datetime) -> None:
    seller = conn.execute(select(t.sellers).where(t.sellers.c.id == seller_id)).one()
    balance = ledger.account_id(
        conn, environment=seller.environment, kind=ledger.SELLER_BALANCE, ref_id=seller_id
    )
    if balance is None:
        return
    ledger.lock_accounts(conn, [balance])  # one auto payout per seller, however many workers
    busy = conn.execute(
        select(_w.c.id).where(_w.c.seller_id == seller_id, _w.c.status.in_(ACTIVE)).limit(1)
    ).first()
    minimum = effective_minimum(account_of(conn, seller_id), settings.auto_payout_minimum_micros)
    if busy is not None or minimum is None or ledger.available_micros(conn, balance) < minimum:
        return
    try:
        processor = processor_for(settings, seller.environment, public_url="")
        withdraw(
            conn,
            seller,
            amount=None,
            processor=processor.name,
            request_id=None,
            now=now,
            automatic=True,
            unit_micros=processor.unit_micros,
        )
    except DomainError:  # not enabled any more, or the balance went meanwhile
        return

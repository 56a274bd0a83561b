"""The Stripe events that move Connect accounts and payouts (``account.updated``,
``payout.paid``, ``payout.failed``, ``payout.updated``), applied inside the transaction
that records the event.  Apart from :mod:`.connect` so that the processor the domain
picks (``payouts.processor_for``) does not import the payout progress that picks it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, update

from ..domain.payouts import progress
from ..domain.payouts.connect import apply_status
from ..domain.payouts.withdrawals import ACTIVE
from ..settings import Settings
from ..store import tables as t
from ..timeutil import as_utc
from .connect import payout_status, status_of
from .events import Handler, ProcessorEvent

__all__ = ["HANDLERS"]

_pa = t.payout_accounts
_w = t.withdrawals


def _account_updated(
    conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime
) -> None:
    """The account's readiness as the event states it, unless we already hold a later
    reading (Stripe does not promise to deliver events in order)."""
    account_id = str(event.object.get("id"))
    row = conn.execute(
        select(_pa).where(_pa.c.processor == "stripe", _pa.c.processor_account_id == account_id)
    ).first()
    if row is None:
        return  # not one of ours (another platform's account, or not opened here)
    last = row.processor_event_at
    if last is not None and as_utc(last) > event.created_at:
        return
    # Compared with events only: a sync reads the account at our clock, and an event
    # stamped (in whole seconds) just before it may still carry a later change.
    apply_status(conn, row, status_of(event.object), synced_at=now, now=now)
    conn.execute(update(_pa).where(_pa.c.id == row.id).values(processor_event_at=event.created_at))


def _payout_concluded(
    conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime
) -> None:
    payout = event.object
    query = select(_w).where(
        _w.c.processor == "stripe",
        _w.c.processor_payout_id == str(payout.get("id")),
        _w.c.status.in_(ACTIVE),
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        return  # concluded already (by the worker's poll), or not ours
    status = payout_status(
        str(payout.get("status")), payout.get("failure_code"), payout.get("failure_message")
    )
    if status.status in ("paid", "failed"):
        progress.conclude(conn, row, status.status, status.failure_reason, now)
    elif status.status != row.status:
        conn.execute(
            update(_w).where(_w.c.id == row.id).values(status=status.status, updated_at=now)
        )


#: Event type -> what applying it does.
HANDLERS: dict[str, Handler] = {
    "account.updated": _account_updated,
    "payout.paid": _payout_concluded,
    "payout.failed": _payout_concluded,
    "payout.updated": _payout_concluded,
}

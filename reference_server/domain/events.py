"""The outbox: events are rows written in the transaction that causes them.

Recording an event also writes one delivery row per webhook endpoint that wants it, in the
same transaction: if the change commits, its deliveries exist; if it rolls back, neither
does.  The delivery worker (``reference_server.outbox``) takes it from there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs
from sqlalchemy import Connection, Table

from ..ids import new_id
from ..store import tables as t
from ..store.database import NEW_DELIVERIES
from ..store.rows import insert_rows
from ..telemetry import REQUEST_ID, current_traceparent
from .webhook_endpoints import matching_endpoints

if TYPE_CHECKING:
    from ..store import Database

__all__ = [
    "EVENT_TYPES",
    "NEW_DELIVERIES",
    "OUTBOX_CHANNEL",
    "NewEvent",
    "Outbox",
    "new_delivery",
    "record_event",
    "record_events",
    "writing",
]

#: The PostgreSQL ``NOTIFY`` channel a commit that queued deliveries signals.
OUTBOX_CHANNEL = "svc_outbox"
_NOTIFIED = "svc_outbox_notified"

#: Every event the service emits (the spec's list), with what causes it.
EVENT_TYPES: dict[str, str] = {
    "payment.succeeded": "A payment for a resource settled (ledger or open rail).",
    "payment.failed": "An attempted payment was refused or failed to settle.",
    "transfer.received": "A ledger transfer reached one of your handles.",
    "funding.paid": "A wallet key was funded.",
    "funding.refunded": "Funds were returned from a wallet key.",
    "withdrawal.paid": "A withdrawal reached the payout account.",
    "withdrawal.failed": "A withdrawal failed; the balance was restored.",
    "vw.revoked": "A wallet key was revoked.",
    "allowance.reset": "A wallet key's periodic allowance was reset.",
    "seller.withdrawn": "A seller's balance was withdrawn or recycled.",
    "resource.updated": "A priced resource changed (path, amount, state...).",
    # Beyond the spec's list:
    "payment.refunded": "A seller gave back all or part of a payment (POST /refunds).",
    "payment.refund_failed": "A pending refund (on chain or by card) failed; its money is back "
    "on the seller's balance.",
    "approval.requested": "A wallet key's payment waits for a person's approval.",
    "approval.decided": "A pending approval was approved, declined or expired.",
}


def record_event(
    conn: Connection,
    *,
    owner_id: str,
    environment: str,
    type: str,
    data: dict[str, Any],
    now: datetime,
    endpoints: list[str] | None = None,
) -> str:
    """The event and its deliveries; ``endpoints``: the subscribed endpoints' ids when the
    caller read them already (a sale, before it took its locks)."""
    if endpoints is None:
        endpoints = matching_endpoints(
            conn, owner_id=owner_id, environment=environment, event_type=type
        )
    event = NewEvent(
        owner_id=owner_id,
        environment=environment,
        type=type,
        data=data,
        now=now,
        endpoints=endpoints,
    )
    return record_events(conn, [event])[0]


@attrs.frozen(kw_only=True)
class NewEvent:
    """An event for :func:`record_events`, with its subscribed endpoints' ids."""

    owner_id: str
    environment: str
    type: str
    data: dict[str, Any]
    now: datetime
    endpoints: list[str]


def record_events(conn: Connection, new: list[NewEvent]) -> list[str]:
    """Several events and their deliveries, one ``INSERT`` each (a group of payments,
    ``payments.pay_resources``); the same rows as :func:`record_event` writes."""
    outbox = Outbox.of(new)
    for table, rows in outbox.batches:
        insert_rows(conn, table, rows)
    outbox.written(conn)
    return outbox.event_ids


@attrs.frozen
class Outbox:
    """The rows of several events and their deliveries (:func:`record_events`), for a
    caller that writes them with its own rows in one statement
    (``payments.pay_resources``); :meth:`written` once they are."""

    events: list[dict[str, Any]]
    deliveries: list[dict[str, Any]]

    @classmethod
    def of(cls, new: list[NewEvent]) -> Outbox:
        rows = []
        deliveries = []
        # The request being served (if any) caused these events: its deliveries' traces
        # name it (outbox/worker.py).
        origin, traceparent = REQUEST_ID.get(), current_traceparent()
        for event in new:
            if event.type not in EVENT_TYPES:
                raise ValueError(f"unknown event type {event.type!r}")
            event_id = new_id("evt")
            rows.append(
                {
                    "id": event_id,
                    "environment": event.environment,
                    "owner_id": event.owner_id,
                    "type": event.type,
                    "data": event.data,
                    "created_at": event.now,
                    "request_id": origin,
                    "traceparent": traceparent,
                }
            )
            deliveries += [new_delivery(event_id, e, event.now) for e in event.endpoints]
        return cls(rows, deliveries)

    @property
    def batches(self) -> list[tuple[Table, list[dict[str, Any]]]]:
        """The rows by table, events first (a delivery names its event)."""
        return [(t.events, self.events), (t.webhook_deliveries, self.deliveries)]

    @property
    def event_ids(self) -> list[str]:
        return [str(row["id"]) for row in self.events]

    def written(self, conn: Connection) -> None:
        """Wake the delivery workers when deliveries were queued."""
        if self.deliveries:
            _wake_workers(conn)
            conn.info[NEW_DELIVERIES] = True


def _wake_workers(conn: Connection) -> None:
    """On PostgreSQL, ``NOTIFY`` the workers of every process (once per transaction):
    PostgreSQL delivers it when the transaction commits, and never if it rolls back, so
    a worker that ``LISTEN``s (``outbox/wakeup.py``) claims the new deliveries at once
    instead of at its next poll.  SQLite has no such thing: its other processes poll."""
    if conn.dialect.name != "postgresql":
        return
    transaction = conn.get_nested_transaction() or conn.get_transaction()
    if conn.info.get(_NOTIFIED) is transaction:
        return
    conn.exec_driver_sql(f"NOTIFY {OUTBOX_CHANNEL}")
    conn.info[_NOTIFIED] = transaction


def new_delivery(event_id: str, endpoint_id: str, now: datetime) -> dict[str, Any]:
    """An outbox row, due now."""
    return {
        "id": new_id("dlv"),
        "endpoint_id": endpoint_id,
        "event_id": event_id,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }


@contextmanager
def writing(db: Database, notify: Callable[[], None]) -> Iterator[Connection]:
    """``db.write()`` that calls ``notify`` once it committed deliveries: the worker is
    woken only for rows it can already see, and no caller repeats the check."""
    with db.write() as conn:
        yield conn
        queued = conn.info.pop(NEW_DELIVERIES, False)
    if queued:
        notify()

"""What the books say, read at scrape time (see the package): one short read
transaction of grouped counts, the same answer from every process."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Connection, func, select

from ..store import Database
from ..store import tables as t
from ..timeutil import as_utc

__all__ = ["Books"]

_MICROS = 1_000_000


class Books(Collector):
    """The database's families, for one server's database."""

    def __init__(self, db: Database, now: datetime) -> None:
        self._db = db
        self._now = as_utc(now)

    def collect(self) -> Iterator[Metric]:
        with self._db.read() as conn:
            yield from _payments(conn)
            yield from _pay_url_attempts(conn)
            yield from _outbox(conn, self._now)
            yield from _withdrawals(conn)
            yield from _approvals(conn)
            yield from _reconciliation(conn)


def _payments(conn: Connection) -> Iterator[Metric]:
    r = t.receipts.c
    labels = ["environment", "kind", "rail", "settlement", "status"]
    count = CounterMetricFamily(
        "svc_payments",
        "Payments (receipts) booked, by what they are and their status.",
        labels=labels,
    )
    amount = CounterMetricFamily(
        "svc_payments_amount_usd", "What those payments amount to, in dollars.", labels=labels
    )
    refunded = CounterMetricFamily(
        "svc_payments_refunded_usd", "What refunds gave back of them, in dollars.", labels=labels
    )
    keys = [r.environment, r.kind, r.rail, r.settlement, r.status]
    rows = conn.execute(
        select(
            *keys,
            func.count(),
            func.coalesce(func.sum(r.amount_micros), 0),
            func.coalesce(func.sum(r.refunded_micros), 0),
        ).group_by(*keys)
    )
    for row in rows:
        values = [str(v) for v in row[:5]]
        count.add_metric(values, row[5])
        amount.add_metric(values, int(row[6]) / _MICROS)
        refunded.add_metric(values, int(row[7]) / _MICROS)
    yield from (count, amount, refunded)


def _pay_url_attempts(conn: Connection) -> Iterator[Metric]:
    a = t.spend_attempts.c
    family = CounterMetricFamily(
        "svc_pay_url_attempts",
        "pay-url attempts, by status (succeeded, failed, or still probing or paying) and rail.",
        labels=["environment", "status", "rail"],
    )
    keys = [a.environment, a.status, a.rail]
    for row in conn.execute(select(*keys, func.count()).group_by(*keys)):
        family.add_metric([row[0], row[1], row[2] or ""], row[3])
    yield family


def _outbox(conn: Connection, now: datetime) -> Iterator[Metric]:
    d = t.webhook_deliveries.c
    pending = d.status == "pending"
    backlog = conn.execute(select(func.count()).where(pending)).scalar_one()
    due = conn.execute(
        select(func.min(d.next_attempt_at)).where(pending, d.next_attempt_at <= now)
    ).scalar()
    yield GaugeMetricFamily(
        "svc_webhook_outbox_backlog", "Webhook deliveries waiting for an attempt.", value=backlog
    )
    age = 0.0 if due is None else max(0.0, (now - as_utc(due)).total_seconds())
    yield GaugeMetricFamily(
        "svc_webhook_outbox_oldest_due_age_seconds",
        "How long the oldest delivery that is due has waited past its time (0: none is due).",
        value=age,
    )


def _withdrawals(conn: Connection) -> Iterator[Metric]:
    w = t.withdrawals.c
    family = GaugeMetricFamily(
        "svc_withdrawals",
        "Withdrawals (payouts), by status: pending, in_transit, paid, failed.",
        labels=["environment", "status"],
    )
    keys = [w.environment, w.status]
    for row in conn.execute(select(*keys, func.count()).group_by(*keys)):
        family.add_metric([row[0], row[1]], row[2])
    yield family


def _approvals(conn: Connection) -> Iterator[Metric]:
    """Payments waiting for a person (docs/approvals.md), their amounts held."""
    a = t.approvals.c
    family = GaugeMetricFamily(
        "svc_approvals_pending",
        "Payments over a wallet key's approval line waiting for a person's decision.",
        labels=["environment"],
    )
    rows = conn.execute(
        select(a.environment, func.count()).where(a.status == "pending").group_by(a.environment)
    )
    for row in rows:
        family.add_metric([row[0]], row[1])
    yield family


def _reconciliation(conn: Connection) -> Iterator[Metric]:
    """The latest run of ``svc-server reconcile`` per environment."""
    from ..reconcile.findings import FLOAT  # the package imports the server's context

    c = t.reconciliations.c
    latest = (
        select(c.environment, func.max(c.created_at).label("at")).group_by(c.environment).subquery()
    )
    rows: list[Any] = list(
        conn.execute(
            select(c.environment, c.drift_count, c.created_at, c.error, c.findings).join(
                latest, (c.environment == latest.c.environment) & (c.created_at == latest.c.at)
            )
        )
    )
    drift = GaugeMetricFamily(
        "svc_reconciliation_drift",
        "Findings of the latest reconciliation of the books with the chain (0: they agree).",
        labels=["environment"],
    )
    when = GaugeMetricFamily(
        "svc_reconciliation_last_run_timestamp_seconds",
        "When the latest reconciliation ran (Unix seconds).",
        labels=["environment"],
    )
    failed = GaugeMetricFamily(
        "svc_reconciliation_failed",
        "1 when the latest reconciliation could not compare (the node did not answer).",
        labels=["environment"],
    )
    hot = GaugeMetricFamily(
        "svc_hot_wallet_float_usd",
        "The hot wallet's USDC at the latest reconciliation: what pay-url and refunds on "
        "chain can still pay out before the operator refills it.",
        labels=["environment"],
    )
    for row in rows:
        drift.add_metric([row.environment], row.drift_count)
        when.add_metric([row.environment], as_utc(row.created_at).timestamp())
        failed.add_metric([row.environment], 0 if row.error is None else 1)
        for finding in row.findings or []:
            if finding.get("kind") == FLOAT and finding.get("chain_micros") is not None:
                hot.add_metric([row.environment], finding["chain_micros"] / 1_000_000)
    yield from (drift, when, failed, hot)

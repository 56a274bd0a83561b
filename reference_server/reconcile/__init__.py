"""Reconciliation: the books of every chain-facing ledger account against the chain.

:func:`reconcile` reads one environment's entries (:mod:`.books`) and its chain
(:mod:`.chains`: the live node, or the sandbox chain in ``test``), compares them
(:mod:`.compare`) and returns a :class:`~.findings.Report`; :func:`record` keeps each run in
``reconciliations`` and logs every drift at WARNING, which is what ``svc-server reconcile``
and the worker's periodic run (:func:`due_environments`) do.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, insert, select

from ..context import ServerContext
from ..ids import new_id
from ..store import tables as t
from ..telemetry import annotate, failed, span
from ..timeutil import as_utc
from .books import Books, read_books
from .chains import LiveChain, SandboxChain
from .compare import compare
from .findings import Finding, Report, render_table

__all__ = [
    "Finding",
    "ReconcileError",
    "Report",
    "due_environments",
    "history",
    "reconcile",
    "reconcile_due",
    "record",
    "render_table",
]

log = logging.getLogger("reference_server.reconcile")
_rc = t.reconciliations


class ReconcileError(Exception):
    """The environment cannot be reconciled as configured (no node, say)."""


def _addresses(ctx: ServerContext, environment: str) -> tuple[str | None, str | None]:
    """The environment's deposit address and hot wallet (``None`` where there is none)."""
    from ..domain.open_rails import TEST_DEPOSIT_ADDRESS
    from ..domain.paid_fetch.hot_wallet import hot_wallet

    settings = ctx.settings
    if environment == "test":
        return TEST_DEPOSIT_ADDRESS, hot_wallet(ctx, "test").address
    hot = hot_wallet(ctx, "live").address if settings.live_hot_wallet_key else None
    return settings.live_deposit_address, hot


def reconcile(ctx: ServerContext, environment: str) -> Report:
    """Compare ``environment``'s books with its chain now; raises :class:`ReconcileError`
    when live has no node to read (``SVC_LIVE_RPC_URL``)."""
    settings = ctx.settings
    deposit, hot = _addresses(ctx, environment)
    if environment == "test":  # one read transaction: the two sides as of one moment
        with ctx.db.read() as conn:
            return compare(
                environment, read_books(conn, "test", deposit), SandboxChain(conn), deposit, hot
            )
    if not settings.live_rpc_url:
        raise ReconcileError(
            "live reconciliation reads the chain through SVC_LIVE_RPC_URL, which is not set"
        )
    chain = LiveChain(
        settings.live_rpc_url, settings.live_asset_address, settings.live_reconcile_from_block
    )

    def read() -> Books:
        with ctx.db.read() as conn:
            return read_books(conn, environment, deposit)

    return compare(environment, read, chain, deposit, hot)


def record(
    conn: Connection,
    report: Report | None,
    *,
    environment: str,
    now: datetime,
    error: str | None = None,
) -> str:
    """Keep one run (or why it could not run) in ``reconciliations``; each drift is also a
    WARNING log line, for whoever watches the logs rather than the table."""
    run_id = new_id("recon")
    conn.execute(
        insert(_rc).values(
            id=run_id,
            environment=environment,
            created_at=now,
            from_block=None if report is None else report.from_block,
            to_block=None if report is None else report.to_block,
            drift_count=0 if report is None else len(report.drift),
            findings=[] if report is None else [f.to_json() for f in report.findings],
            error=error,
        )
    )
    if error is not None:
        log.warning("reconciliation %s of %s could not run: %s", run_id, environment, error)
    for finding in report.drift if report is not None else ():
        log.warning(
            "reconciliation %s of %s: drift %s on %s %s: ledger %s, chain %s, tx %s: %s",
            run_id,
            environment,
            finding.kind,
            finding.account,
            finding.address,
            finding.ledger_micros,
            finding.chain_micros,
            finding.tx_hash,
            finding.detail,
        )
    return run_id


def history(
    conn: Connection, *, environment: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """The most recent runs, newest first."""
    query = select(_rc).order_by(_rc.c.created_at.desc(), _rc.c.id.desc()).limit(limit)
    if environment is not None:
        query = query.where(_rc.c.environment == environment)
    return [
        {**row._mapping, "created_at": as_utc(row.created_at).isoformat()}
        for row in conn.execute(query)
    ]


def due_environments(conn: Connection, ctx: ServerContext) -> list[str]:
    """The environments whose last recorded run is older than the interval (several
    worker processes then run one reconciliation per interval between them, roughly);
    live only when a node is configured, test only when the sandbox chain is served."""
    settings = ctx.settings
    interval = settings.reconcile_interval_seconds
    if not interval:
        return []
    wanted = [
        env
        for env, on in (("test", settings.sandbox_enabled), ("live", bool(settings.live_rpc_url)))
        if on
    ]
    since = ctx.now() - timedelta(seconds=interval)
    recent = {
        row.environment
        for row in conn.execute(
            select(_rc.c.environment).where(_rc.c.created_at > since).distinct()
        )
    }
    return [env for env in wanted if env not in recent]


def reconcile_due(ctx: ServerContext) -> list[str]:
    """The worker's periodic run: reconcile each environment that is due and record it
    (a chain that cannot be read is recorded as the run's error); the run ids."""
    with ctx.db.read() as conn:
        due = due_environments(conn, ctx)
    runs = []
    for env in due:
        report: Report | None = None
        error = None
        with span("reconciliation", **{"svc.environment": env}):  # a trace of its own
            try:
                report = reconcile(ctx, env)
            except Exception as exc:  # the node is down, say: recorded, tried next interval
                error = f"{type(exc).__name__}: {exc}"[:2000]
                failed(error)
            with ctx.db.write() as conn:
                runs.append(record(conn, report, environment=env, now=ctx.now(), error=error))
            if report is not None:
                annotate(**{"svc.reconciliation.drift": len(report.drift)})
    return runs

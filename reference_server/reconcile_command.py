"""``svc-server reconcile``: the books of the chain-facing accounts against the chain, as a
table (or ``--json``), exit status 1 on any drift; ``--history`` lists recent runs.  Kept
out of :mod:`reference_server.commands` so that module stays about the server's life."""

from __future__ import annotations

import json
from typing import Any

import click

from .command_setup import command_settings

__all__ = ["reconcile_command"]


def _environments(chosen: str | None, rpc_url: str | None) -> list[str]:
    if chosen is not None:
        return [chosen]
    return ["test", "live"] if rpc_url else ["test"]


@click.command("reconcile")
@click.option(
    "--environment",
    type=click.Choice(["test", "live"]),
    default=None,
    help="One environment (default: test, and live when SVC_LIVE_RPC_URL is set).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--history", is_flag=True, help="List recent runs instead of running one.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="How many runs --history lists, newest first.",
)
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def reconcile_command(
    environment: str | None, as_json: bool, history: bool, limit: int, database_url: str | None
) -> None:
    """Compare the deposit address, the hot wallet and direct-wallet settlements with the
    chain (live: SVC_LIVE_RPC_URL from SVC_LIVE_RECONCILE_FROM_BLOCK; test: the sandbox
    chain); print a table; exit 1 on any drift.  Each run is recorded (see --history)."""
    from .context import ServerContext

    settings = command_settings(database_url=database_url, server_database=True)
    ctx = ServerContext(settings)
    try:
        if history:
            _history(ctx, environment, limit, as_json)
            return
        drift = _run(ctx, _environments(environment, settings.live_rpc_url), as_json)
    finally:
        ctx.db.dispose()
    if drift:
        raise SystemExit(1)


def _run(ctx: Any, environments: list[str], as_json: bool) -> int:
    from . import reconcile as books

    reports: list[dict[str, Any]] = []
    drift = 0
    for env in environments:
        try:
            report = books.reconcile(ctx, env)
        except books.ReconcileError as exc:
            raise click.ClickException(str(exc)) from None
        with ctx.db.write() as conn:
            run_id = books.record(conn, report, environment=env, now=ctx.now())
        drift += len(report.drift)
        reports.append({"run_id": run_id, **report.to_json()})
        if not as_json:
            state = f"{len(report.drift)} drift" if report.drift else "reconciled"
            click.echo(
                f"{env}: blocks {report.from_block}..{report.to_block}: {state} (run {run_id})"
            )
            click.echo(books.render_table(report.findings))
    if as_json:
        click.echo(json.dumps({"drift_count": drift, "runs": reports}, indent=2))
    return drift


def _history(ctx: Any, environment: str | None, limit: int, as_json: bool) -> None:
    from . import reconcile as books
    from .reconcile.findings import columns

    with ctx.db.read() as conn:
        runs = books.history(conn, environment=environment, limit=limit)
    if as_json:
        click.echo(json.dumps({"runs": runs}, indent=2))
        return
    rows = [("RUN", "ENVIRONMENT", "AT", "BLOCKS", "DRIFT", "ERROR")]
    for run in runs:
        blocks = "-" if run["to_block"] is None else f"{run['from_block']}..{run['to_block']}"
        which = (run["id"], run["environment"], run["created_at"])
        rows.append((*which, blocks, str(run["drift_count"]), run["error"] or ""))
    click.echo(columns(rows))

"""``svc-server``'s commands: run the service, create owners, migrate the database, print
the API's OpenAPI document.  The entry point is :mod:`reference_server.cli`, which says
how to install the server extra when this module cannot be imported."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .context import ServerContext

from . import telemetry
from .command_setup import command_settings, say
from .reconcile_command import reconcile_command
from .settings import Settings, env_variable

__all__ = ["main"]

#: How long the sandbox takes per payout step in ``run --demo`` (the default is 5 s).
_DEMO_PAYOUT_SECONDS = 1.0


@click.group()
def main() -> None:
    """The svc reference server (SQLite by default; set SVC_DATABASE_URL for PostgreSQL)."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
@click.option("--demo", is_flag=True, help="Once up, walk the go-live flow against it.")
@click.option("--exit-after-demo", is_flag=True, help="Stop the server when the demo is done.")
def run(host: str, port: int, database_url: str | None, demo: bool, exit_after_demo: bool) -> None:
    """Serve the API with uvicorn."""
    from .serving import build_server

    walking = demo or exit_after_demo
    settings = command_settings(
        database_url=database_url,
        # The demo follows a withdrawal until paid: the sandbox moves it a step a second
        # (unless SVC_SANDBOX_PAYOUT_SECONDS says otherwise).
        sandbox_payout_seconds=_DEMO_PAYOUT_SECONDS
        if walking and env_variable("sandbox_payout_seconds") not in os.environ
        else None,
    )
    if settings.public_url is None and not settings.production:
        # Production publishes only an https SVC_PUBLIC_URL, or the address asked for.
        settings = settings.evolve(public_url=f"http://{host}:{port}")
    _say_setup(settings)
    outcome: dict[str, Any] = {}
    try:
        # The demo's numbered steps are what its reader follows: no access-log line between.
        server = build_server(
            settings, host=host, port=port, own_process=True, access_log=not walking
        )
        threading.Thread(
            target=_when_started,
            args=(server, settings, walking, exit_after_demo, outcome),
            daemon=True,
        ).start()
        server.run()
    except KeyboardInterrupt:
        # uvicorn stops gracefully on Ctrl-C, then raises the signal again for whoever
        # started it; the stop was asked for, so it ends here: exit 0, no "Aborted!".
        pass
    say(settings, "svc-server stopped")
    if outcome.get("error"):
        raise SystemExit(f"demo failed: {outcome['error']}")


def _say_setup(settings: Settings) -> None:
    """Before serving, on stderr: the environment and who delivers webhooks (the database
    is said already), so a newcomer sees what this process is before the first request."""
    kind = "production" if settings.production else "development (production: SVC_ENV=production)"
    say(settings, f"environment: {kind}; the API serves test and live")
    if settings.worker_enabled:
        workers = "this process serves the API and delivers webhooks (SVC_WORKER_ENABLED=true)"
    else:
        workers = (
            "this process serves the API only (SVC_WORKER_ENABLED=false); webhooks are "
            "delivered by svc-server worker processes"
        )
    say(settings, f"workers: {workers}")


def _serving_url(server: Any) -> str:
    """The address the server listens on, as bound (``--port 0`` is a port the kernel chose)."""
    host, port = server.config.host, server.config.port
    for listener in getattr(server, "servers", ()):
        for sock in listener.sockets:
            port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _when_started(
    server: Any, settings: Settings, walking: bool, exit_after: bool, outcome: dict[str, Any]
) -> None:
    """Once the server listens: say where (stderr), then walk the demo if asked."""
    import time

    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    url = _serving_url(server)
    public = settings.public_url or "the address each request came to"
    say(settings, f"serving: {url} (gate_url and pay_url on {public}); Ctrl-C to stop")
    if walking:
        _walk_demo(server, settings.public_url or url, exit_after, outcome)


def _walk_demo(server: Any, base_url: str, exit_after: bool, outcome: dict[str, Any]) -> None:
    from .go_live_demo import walk_go_live

    try:
        walk_go_live(base_url, echo=click.echo)
    except Exception as exc:  # report and stop, the demo is for humans
        outcome["error"] = repr(exc)
        server.should_exit = True
        return
    if exit_after:
        server.should_exit = True
    else:
        click.echo(f"\nServer still running at {base_url} (Ctrl-C to stop).")


@main.command()
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def worker(database_url: str | None) -> None:
    """Deliver webhooks from the outbox, without serving the API (run as many as needed)."""
    import anyio

    from .context import ServerContext
    from .serving import freeze_heap
    from .store import upgrade

    ctx = ServerContext(command_settings(database_url=database_url))
    telemetry.configure_logging(ctx.settings.log_format)
    if ctx.settings.tracing:
        telemetry.start_tracing(ctx.db)
    upgrade(ctx.db)
    ctx.load_secrets()
    freeze_heap()
    try:
        anyio.run(
            _work_until_signalled, ctx, lambda: click.echo("outbox worker running (Ctrl-C to stop)")
        )
    except KeyboardInterrupt:
        pass
    finally:
        ctx.db.dispose()
    click.echo("outbox worker stopped")


async def _work_until_signalled(ctx: ServerContext, running: Callable[[], None]) -> None:
    """Run the worker until SIGTERM or SIGINT, then stop it gracefully: what it claimed is
    sent and recorded, and the process exits 0.  The handlers are installed here rather
    than left to Python's KeyboardInterrupt, which a process started in the background
    by a shell never gets (SIGINT is ignored there), and which SIGTERM -- what systemd,
    Docker and Kubernetes send -- never raises.  ``running`` says so once they are in
    place: a signal sent after that line is always a graceful stop (one sent between
    the line and the handlers, on a busy machine, killed the worker outright)."""
    import signal

    import anyio

    from .outbox import run_worker

    stop = anyio.Event()
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        running()

        async def watch() -> None:
            async for _ in signals:
                stop.set()
                return

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await run_worker(ctx, stop=stop)
            group.cancel_scope.cancel()


@main.command()
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def migrate(database_url: str | None) -> None:
    """Bring the database schema up to date (run also at server start)."""
    from .store import Database, upgrade

    upgrade(Database(command_settings(database_url=database_url).database_url))
    click.echo("database is up to date")


@main.command()
@click.option(
    "--base-url",
    default="https://svc.example",
    show_default=True,
    help="The server URL the document names.",
)
def openapi(base_url: str) -> None:
    """Print the OpenAPI document (what /agent-openapi.json serves) as JSON; no server runs."""
    from .api_reference import openapi_document

    click.echo(json.dumps(openapi_document(base_url), indent=2))


@main.group()
def owners() -> None:
    """Owners: the accounts behind sellers, wallet keys and webhooks."""


@owners.command("create")
@click.option("--email", required=True, help="The owner's email (one owner per email).")
@click.option("--json", "as_json", is_flag=True, help='Print {"owner_id", "owner_jwt"}.')
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def owners_create(email: str, as_json: bool, database_url: str | None) -> None:
    """Create an owner (or reuse the one with this email) and print a fresh owner JWT,
    straight in the database (stderr names it: the server must use the same one; a
    database no server has run on is refused).  Over HTTP, where sign-up is open,
    `svc owners create` does the same."""
    from .context import ServerContext
    from .domain.owners import create_owner, find_owner_by_email
    from .store import upgrade
    from .web.auth import issue_owner_jwt

    settings = command_settings(database_url=database_url, server_database=True)
    ctx = ServerContext(settings)
    upgrade(ctx.db)
    secret = ctx.jwt_secret
    email = email.strip().lower()
    with ctx.db.write() as conn:
        owner_id = find_owner_by_email(conn, email) or create_owner(conn, email, ctx.now())
    token = issue_owner_jwt(owner_id, secret, ctx.now(), settings.jwt_ttl_seconds)
    ctx.db.dispose()
    if as_json:
        click.echo(json.dumps({"owner_id": owner_id, "owner_jwt": token}))
    else:
        click.echo(token)


@main.group("receipt-keys")
def receipt_keys() -> None:
    """The Ed25519 keys receipt tokens are signed with (GET /.well-known/jwks.json)."""


@receipt_keys.command("rotate")
@click.option(
    "--environment", type=click.Choice(["test", "live"]), required=True, help="Whose key."
)
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def receipt_keys_rotate(environment: str, database_url: str | None) -> None:
    """Put a new signing key in front and print its kid.  Every server publishes it at
    once; each signs with it from its next start.  The old keys stay published until
    the tokens they signed have expired (24 hours)."""
    from . import receipt_tokens
    from .context import ServerContext
    from .store import upgrade

    ctx = ServerContext(command_settings(database_url=database_url, server_database=True))
    upgrade(ctx.db)
    ctx.load_secrets()
    with ctx.db.write() as conn:
        kid = receipt_tokens.rotate(ctx, conn, environment)
    ctx.db.dispose()
    click.echo(kid)


@main.group()
def ledger() -> None:
    """The double-entry ledger."""


@ledger.command("audit")
@click.option("--database-url", default=None, help="Overrides SVC_DATABASE_URL.")
def ledger_audit(database_url: str | None) -> None:
    """Recompute every balance from the transfers; exit 1 if anything disagrees."""
    from .domain import ledger as books
    from .store import Database

    settings = command_settings(database_url=database_url, server_database=True)
    db = Database(settings.database_url)
    with db.read() as conn:
        problems = [p for env in books.ENVIRONMENTS for p in books.audit(conn, env)]
        totals = {env: books.sum_of_balances(conn, env) for env in books.ENVIRONMENTS}
    db.dispose()
    for env, total in totals.items():
        click.echo(f"{env}: balances sum to {total} micro-USD")
    for problem in problems:
        click.echo(f"PROBLEM: {problem}")
    if problems:
        raise SystemExit(1)
    click.echo("ledger is sound")


@main.command()
@click.option(
    "--port", default=8402, show_default=True, type=int, help="Port of the x402 facilitator."
)
def devchain(port: int) -> None:
    """A real EVM chain on this machine: anvil on loopback, a USDC-like token deployed on
    it, and the official x402 facilitator at http://127.0.0.1:PORT.  Prints an export line
    for every SVC_LIVE_* setting it implies and two funded payer keys; Ctrl-C stops all.
    Needs the devchain extra and anvil: npm install --prefix ~/.cache/svc-devchain
    @foundry-rs/anvil@1.7.1 (SVC_DEVCHAIN_NPM_PREFIX names another folder)."""
    try:
        from .devchain.node import AnvilMissing
        from .devchain.run import serve_devchain
    except ModuleNotFoundError as missing:
        raise click.ClickException(
            f"devchain needs the devchain extra ({missing.name} is not installed): "
            "pip install 'svc-payments[devchain]'"
        ) from None
    try:
        serve_devchain(port, say=click.echo, tell=lambda line: click.echo(line, err=True))
    except AnvilMissing as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    click.echo("devchain stopped", err=True)


main.add_command(reconcile_command)

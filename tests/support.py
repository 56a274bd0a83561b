"""Test support: a live reference server on loopback and quick account set-up."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import uvicorn

from reference_server import Settings, create_app
from reference_server.context import ServerContext
from reference_server.serving import build_server


@attrs.define
class LiveApp:
    """An ASGI app in a uvicorn thread on 127.0.0.1."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@attrs.define
class LiveServer(LiveApp):
    """A reference server in a uvicorn thread on 127.0.0.1, on a free port."""

    ctx: ServerContext
    settings: Settings


#: Where the tests that need Redis find it: ``SVC_TEST_REDIS_URL``, else Redis's own
#: default address, as on a developer's machine with ``redis-server`` running.
TEST_REDIS_URL = os.environ.get("SVC_TEST_REDIS_URL") or "redis://127.0.0.1:6379"


T = TypeVar("T")


def at_once(count: int, call: Callable[[], T]) -> list[T]:
    """``call`` from ``count`` threads released together by a barrier (a race, not a
    queue); their results, in the order they finished."""
    start = threading.Barrier(count)
    results: list[T] = []

    def one() -> None:
        start.wait()
        results.append(call())

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == count, "a racing call raised"
    return results


def until(check: Callable[[], T], what: str = "not reached in time", *, seconds: float = 20.0) -> T:
    """Call ``check`` every 50 ms until it returns something truthy, and return that;
    fail with ``what`` once ``seconds`` have passed: waiting on what runs in the
    background (a worker, a webhook, a processor's event)."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return value


def redis_answers(url: str = TEST_REDIS_URL) -> bool:
    """Does a Redis answer PING at ``url``?  The Redis tests skip only when none does."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def unopened_app(database: Path | None = None, **settings: Any) -> Any:
    """The server's app on an SQLite file it never opens (building it opens no connection):
    for its route table, or for requests refused before any database is asked."""
    path = database or Path(tempfile.gettempdir()) / "svc-never-opened.db"
    return create_app(Settings(database_url=f"sqlite:///{path}", auto_migrate=False, **settings))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_python(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python *args`` in a child process (``env`` its whole environment, else this one's),
    its output captured as text; the caller checks its exit status."""
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def serve_asgi(app: Any, *, lifespan: str = "auto") -> LiveApp:
    """Run an ASGI app (a seller's app, a paid URL) in a uvicorn thread on loopback."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan
    )
    server = uvicorn.Server(config)
    return LiveApp(url=f"http://127.0.0.1:{port}", server=server, thread=_started(server))


def _started(server: uvicorn.Server) -> threading.Thread:
    """``server`` running on a daemon thread, once it listens."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return thread


def start_server(settings: Settings) -> LiveServer:
    """The production configuration (``reference_server.serving.build_server``, the
    one ``svc-server run`` uses) in a thread; outside production its public URL is the
    loopback address (production publishes only https URLs: ``None`` there means the
    address a request came to)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if settings.public_url is None and not settings.production:
        settings = settings.evolve(public_url=url)
    server = build_server(settings, host="127.0.0.1", port=port, log_level="warning")
    thread = _started(server)
    ctx = server.config.app.state.ctx
    return LiveServer(url=url, ctx=ctx, settings=settings, server=server, thread=thread)


#: What production insists on from outside the database (its keys are never generated).
PRODUCTION_KEYS: dict[str, Any] = {
    "jwt_secret": "test-production-jwt-secret-0123456789abcdef",
    "data_key": "8Zb4QgFqgJ0nSx2Zk2G6wQkqg3H7t6Y0R4b3M5l9sVw=",
}

#: Test defaults: limits high enough that concurrency tests are not throttled.
TEST_SETTINGS: dict[str, Any] = {
    "rate_limit": "100000/second",
    "signup_rate_limit": "100000/second",
    # Reconciliation runs when a test asks for it (tests/reconcile), not every hour.
    "reconcile_interval_seconds": 0,
}


@attrs.frozen
class Account:
    """An owner with one seller and one (unfunded, unlimited) wallet key in ``test``."""

    owner_jwt: str
    owner_id: str
    seller_id: str
    seller_key: str
    wallet_key_id: str
    wallet_key: str

    def bearer(self, role: str) -> dict[str, str]:
        """The ``Authorization`` header of this account's ``role`` (a ``Role`` or its name)."""
        key = {"owner": self.owner_jwt, "seller": self.seller_key, "wallet": self.wallet_key}
        return {"Authorization": f"Bearer {key[role]}"}


#: The event types the spec lists (docs/events.md), written out here once: the catalog
#: the server serves and the SDK's typed models are each checked against it.
SPEC_EVENT_TYPES = frozenset(
    {
        "payment.succeeded",
        "payment.failed",
        "transfer.received",
        "funding.paid",
        "funding.refunded",
        "withdrawal.paid",
        "withdrawal.failed",
        "vw.revoked",
        "allowance.reset",
        "seller.withdrawn",
        "resource.updated",
    }
)
#: The events the service sends beyond the spec's list (docs/events.md says which).
BEYOND_SPEC_EVENT_TYPES = frozenset(
    {"payment.refunded", "payment.refund_failed", "approval.requested", "approval.decided"}
)
#: Every event the service sends: the server's catalog and the SDK's typed models.
ALL_EVENT_TYPES = SPEC_EVENT_TYPES | BEYOND_SPEC_EVENT_TYPES


def new_account(base_url: str, environment: str = "test") -> Account:
    with httpx.Client(base_url=base_url) as http:
        r = http.post("/owners", json={"email": f"o{secrets.token_hex(6)}@example.com"})
        r.raise_for_status()
        owner = r.json()
        auth = {"Authorization": f"Bearer {owner['owner_jwt']}", "X-Svc-Environment": environment}
        r = http.post("/sellers", json={"name": "shop"}, headers=auth)
        r.raise_for_status()
        seller = r.json()
        r = http.post("/wallet-keys", json={"name": "agent"}, headers=auth)
        r.raise_for_status()
        wallet = r.json()
    return Account(
        owner_jwt=owner["owner_jwt"],
        owner_id=owner["owner_id"],
        seller_id=seller["id"],
        seller_key=seller["seller_key"],
        wallet_key_id=wallet["id"],
        wallet_key=wallet["key"],
    )


def assert_ledger_sound(live: LiveServer) -> None:
    """Run after every server test: money was neither created nor lost, in either
    environment, and every receipt matches exactly one transfer."""
    from reference_server.domain import ledger

    with live.ctx.db.read() as conn:
        problems = [p for env in ledger.ENVIRONMENTS for p in ledger.audit(conn, env)]
    live.ctx.db.dispose()
    assert problems == [], problems


@contextmanager
def server_processes(
    database_url: str,
    count: int,
    *,
    public_url: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[str]]:
    """``count`` ``svc-server run`` processes on one (already migrated) database; yields
    their URLs.  ``public_url`` makes them one deployment behind one address, as
    replicas behind a load balancer are (it is what gates bind challenges to); ``env``
    adds ``SVC_*`` variables."""
    procs = [_spawn_server(database_url, public_url, env or {}) for _ in range(count)]
    try:
        yield [url for _, url in procs]
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(timeout=20)


def _spawn_server(
    database_url: str, public_url: str | None, extra: Mapping[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SVC_DATABASE_URL": database_url,
        "SVC_RATE_LIMIT": "100000/second",
        "SVC_PUBLIC_URL": public_url or url,
        **extra,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "run", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # A wait, not a timing: a new interpreter imports the whole server (seconds on a busy
    # machine running both database legs at once).
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server died")
        try:
            if httpx.get(url + "/ready", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server process did not become ready")


def migrate_to(db: Any, revision: str, *, down: bool = False) -> None:
    """Upgrade (or with ``down`` downgrade) ``db`` to ``revision``: a migration test's steps
    around the rows it writes in between."""
    from alembic import command

    from reference_server.store.migrate import alembic_config

    cfg = alembic_config(db)
    with db.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)
        conn.commit()

"""Shared fixtures: a real database (SQLite file, or PostgreSQL when
``SVC_TEST_DATABASE_URL`` names one) and a real uvicorn server on loopback.

Every test that touches a database gets a fresh one: a new SQLite file, or a new
PostgreSQL schema (a migrated one emptied after the test before it: tests/pg_schemas.py).
``SVC_FORBID_SKIPS=1`` (set by ``.ci/run``) turns any skipped test into a failed run,
because CI provides every service.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from reference_server import Settings
from reference_server.recursion import keeping_recursion_limit

from .devchain.running import RunningDevchain, running_devchain
from .pg_schemas import SchemaPool
from .support import (
    PRODUCTION_KEYS,
    TEST_SETTINGS,
    Account,
    LiveApp,
    LiveServer,
    assert_ledger_sound,
    new_account,
    serve_asgi,
    start_server,
)
from .webhooks.receiver import Receiver, start_receiver

POSTGRES_URL = os.environ.get("SVC_TEST_DATABASE_URL")
_PLAIN_POSTGRES_URL = (POSTGRES_URL or "").replace("postgresql+psycopg://", "postgresql://")
#: The schema the session's migrated PostgreSQL template is made in (unique per run: the
#: two CI legs, and helpers, share one server).
_TEMPLATE_SCHEMA = "tmpl_" + secrets.token_hex(6)
#: Every test's PostgreSQL schema, migrated ones emptied and reused (tests/pg_schemas.py).
_SCHEMAS = SchemaPool(_PLAIN_POSTGRES_URL)


def pytest_configure(config: pytest.Config) -> None:
    """eth-account (imported by the sandbox, x402, pympp and web3) imports py_ecc, whose
    import raises the process-wide recursion limit to 100 000.  The whole suite runs in one
    process, and at that limit deeply nested JSON (the hypothesis webhook tests) overflows
    the C stack instead of raising RecursionError.  Import it once before any test module
    and put the limit back, so every later import of it is free of that side effect."""
    with keeping_recursion_limit():
        import eth_account  # noqa: F401


def _one_tls_context_for_plain_httpx_calls() -> None:
    """The tests call ``httpx.get`` and friends thousands of times on loopback, and each
    call's client built httpx's default TLS context, loading the CA bundle (a third of the
    time of tests/money and tests/payurl).  Every default client of the run shares one;
    a client given its own ``verify`` or ``cert`` still gets its own.  Only the speed of
    the suite depends on this (the SDK shares its context by itself: svc/_sender.py)."""
    import ssl

    import httpx._transports.default as transports

    made = transports.create_ssl_context
    shared: list[ssl.SSLContext] = []

    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return made(verify=verify, cert=cert, trust_env=trust_env)
        if not shared:
            shared.append(made())
        return shared[0]

    transports.create_ssl_context = create_ssl_context  # type: ignore[assignment]


_one_tls_context_for_plain_httpx_calls()


def pytest_report_header(config: pytest.Config) -> str:
    return f"svc database under test: {'postgresql' if POSTGRES_URL else 'sqlite'}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if POSTGRES_URL:
        _SCHEMAS.close()
    if os.environ.get("SVC_FORBID_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        print(f"\nSVC_FORBID_SKIPS=1: {skipped} test(s) skipped; CI provides every service.")
        session.exitstatus = 1


@contextmanager
def fresh_database(directory: Path) -> Iterator[str]:
    """A new, empty database: an SQLite file in ``directory`` or a PostgreSQL schema."""
    if not POSTGRES_URL:
        yield f"sqlite:///{directory / 'svc.db'}"
        return
    schema = _SCHEMAS.create()
    sep = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    _SCHEMAS.release(schema)


#: ``UPDATE``/``INSERT``/``DELETE … RETURNING`` statements that carried a subquery.
_SUBQUERY_IN_RETURNING: list[str] = []


def _returning_is_plain(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
) -> None:
    """SQLite renders a ``RETURNING`` clause's columns unqualified, so a correlated
    subquery there compares its own table with itself (a pay-url answer once named
    another seller's receipt that way).  Every statement the suite runs is checked."""
    head = statement.lstrip()[:6].upper()
    if head in ("UPDATE", "INSERT", "DELETE") and " RETURNING " in statement:
        returning = statement.upper().rsplit(" RETURNING ", 1)[1]
        if "SELECT" in returning:
            _SUBQUERY_IN_RETURNING.append(statement)


@pytest.fixture(autouse=True, scope="session")
def _plain_returning() -> Iterator[None]:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _returning_is_plain)
    yield
    event.remove(Engine, "before_cursor_execute", _returning_is_plain)


@pytest.fixture(autouse=True)
def _no_subquery_in_returning() -> Iterator[None]:
    yield
    found, _SUBQUERY_IN_RETURNING[:] = list(_SUBQUERY_IN_RETURNING), []
    assert found == [], f"a subquery in RETURNING (unqualified on SQLite): {found[0]}"


@pytest.fixture(autouse=True)
def _recursion_limit_kept() -> Iterator[None]:
    """No test leaves the recursion limit changed (py_ecc's 100 000, leaked by a guard
    that raced another thread, let a deep JSON body crash the whole run)."""
    limit = sys.getrecursionlimit()
    yield
    assert sys.getrecursionlimit() == limit, (
        f"the recursion limit was left at {sys.getrecursionlimit()} (was {limit})"
    )


@pytest.fixture(scope="session")
def devchain() -> Iterator[RunningDevchain]:
    """``svc-server devchain`` (anvil, the token, the official x402 facilitator), one per
    run; skipped, saying how to install anvil, where it is missing."""
    yield from running_devchain()


@pytest.fixture(scope="session")
def stripe_double() -> Iterator[Any]:
    """The local Stripe (``tests.stripe_double``: the double in front of a localstripe
    process), one per run; skipped, saying how to install localstripe, where it is missing."""
    try:
        import localstripe  # noqa: F401
    except ImportError:
        pytest.skip("localstripe is not installed: pip install -e '.[dev]' (or localstripe)")
    from .stripe_double import running_stripe_double

    yield from running_stripe_double()


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture(scope="module")
def module_server(
    tmp_path_factory: pytest.TempPathFactory, migrated: Callable[[str], None]
) -> Iterator[LiveServer]:
    """One server for a whole module, for read-mostly tests such as the auth matrix."""
    with fresh_database(tmp_path_factory.mktemp("db")) as url:
        migrated(url)
        live = start_server(Settings(**{**TEST_SETTINGS, "database_url": url}))
        yield live
        live.stop()
        assert_ledger_sound(live)


@pytest.fixture(scope="session")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], None]:
    """Puts a database migrated to head, made once per session, into an empty database a
    test server is about to start on, instead of running every migration again: a copy
    of an SQLite file, or a PostgreSQL schema's dump replayed (0.2 s instead of 0.8 s
    per server).  A database that is not empty is left alone, and tests of the
    migrations themselves use ``database_url`` as it comes, empty."""
    from reference_server.store import Database, upgrade

    if not POSTGRES_URL:
        template = tmp_path_factory.mktemp("template") / "svc.db"
        db = Database(f"sqlite:///{template}")
        upgrade(db)
        db.engine.dispose()  # the last connection checkpoints the WAL into the file

        def copy(url: str) -> None:
            target = Path(url.removeprefix("sqlite:///"))
            if url.startswith("sqlite:///") and not target.exists():
                shutil.copyfile(template, target)

        return copy
    if shutil.which("pg_dump") is None:  # each server migrates its schema itself
        return lambda url: None
    dump = _migrated_schema_dump()

    def replay(url: str) -> None:
        found = re.search(r"search_path%3D(\w+)", url)
        if found is None:
            return
        schema = found.group(1)
        if _SCHEMAS.is_empty(schema):
            _SCHEMAS.fill(schema, dump, _TEMPLATE_SCHEMA)

    return replay


def _migrated_schema_dump() -> str:
    """``pg_dump`` of a schema migrated to head, as statements psycopg can run (psql's
    own commands and the schema's creation left out), its name :data:`_TEMPLATE_SCHEMA`."""
    import psycopg

    from reference_server.store import Database, upgrade

    assert POSTGRES_URL is not None
    with psycopg.connect(_PLAIN_POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {_TEMPLATE_SCHEMA}")
    try:
        sep = "&" if "?" in POSTGRES_URL else "?"
        db = Database(f"{POSTGRES_URL}{sep}options={quote(f'-csearch_path={_TEMPLATE_SCHEMA}')}")
        upgrade(db)
        db.engine.dispose()
        dump = subprocess.run(
            [
                *("pg_dump", "--no-owner", "--no-privileges", "--inserts"),
                *("-n", _TEMPLATE_SCHEMA, _PLAIN_POSTGRES_URL),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        with psycopg.connect(_PLAIN_POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {_TEMPLATE_SCHEMA} CASCADE")
    return "\n".join(
        line
        for line in dump.splitlines()
        if not line.startswith("\\") and not line.startswith("CREATE SCHEMA ")
    )


@pytest.fixture
def make_server(
    database_url: str, migrated: Callable[[str], None]
) -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def make(**overrides: Any) -> LiveServer:
        """A server with ``overrides``; a production one gets fixed test keys, since
        production never generates its own."""
        keys = PRODUCTION_KEYS if overrides.get("env") == "production" else {}
        values = {**TEST_SETTINGS, **keys, "database_url": database_url, **overrides}
        migrated(str(values["database_url"]))
        live = start_server(Settings(**values))
        started.append(live)
        return live

    yield make
    for live in started:
        live.stop()
    for live in started:
        assert_ledger_sound(live)


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server()


@pytest.fixture
def account(server: LiveServer) -> Account:
    return new_account(server.url)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def serve_app() -> Iterator[Callable[..., LiveApp]]:
    """Serve ASGI apps (sellers' apps, paid URLs) on loopback for one test; all stopped
    afterwards."""
    started: list[LiveApp] = []

    def start(app: Any, **kwargs: Any) -> LiveApp:
        live = serve_asgi(app, **kwargs)
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


#: Chromium's flags here: no sandbox (root in a container), no GPU, and none of its own
#: network chatter (this machine's network is closed beyond loopback).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian ``chromium`` driven by Playwright (``playwright install`` cannot
    download here, so the system's browser is launched by path).  Skips, saying what to
    install, where either is missing; ``.ci/run`` installs both.  One per module, not per
    session: Playwright's sync API keeps its asyncio loop running in this thread while it
    is open, and any later test that runs a loop of its own would fail."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("browser tests need Debian's chromium: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests need the playwright package: pip install playwright")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies shared between tests) and one page in it."""
    context = browser.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local webhook receiver recording what it is sent (any suite's webhook tests)."""
    r = start_receiver()
    yield r
    r.server.shutdown()

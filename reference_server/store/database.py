"""One handle on the database, with the two kinds of transaction the service needs.

``write()`` is a transaction that will change rows.  On SQLite it starts with
``BEGIN IMMEDIATE`` so that writers queue on the database lock up front instead of
failing with "database is locked" when a read transaction tries to upgrade; on
PostgreSQL it is an ordinary transaction and code that must not race takes row locks
(``SELECT ... FOR UPDATE``).  ``read()`` is a plain transaction that writes nothing.

The same code therefore runs on both databases: SQLite for a laptop (one file, WAL),
PostgreSQL when several processes serve the same data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, create_engine, event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError

if TYPE_CHECKING:
    from ..context import ServerContext

__all__ = ["NEW_DELIVERIES", "Database", "in_transaction", "is_transient", "normalize_url"]

T = TypeVar("T")
#: Flag left on a connection whose transaction queued deliveries (wakes the worker).
NEW_DELIVERIES = "svc_new_deliveries"
#: How many times a transaction rolled back by the database is run again.
_TRANSIENT_RETRIES = 3

#: PostgreSQL serialization_failure and deadlock_detected.
_TRANSIENT_SQLSTATES = {"40001", "40P01"}
#: A pooled PostgreSQL connection idle longer than this is pinged before use (a server
#: restart, a proxy or a firewall may have dropped it); one in steady use is not.
IDLE_PING_SECONDS = 30.0
#: Connections are replaced after this long whatever happens (server-side limits).
RECYCLE_SECONDS = 1800


def is_transient(exc: DBAPIError) -> bool:
    """A deadlock or serialization failure: the transaction was rolled back whole, so
    running it again is safe."""
    return getattr(exc.orig, "sqlstate", None) in _TRANSIENT_SQLSTATES


def in_transaction(ctx: ServerContext, writes: bool, work: Callable[[Connection], T]) -> T:
    """``work`` in one transaction (blocking), run again from the start when the database
    rolled it back as a deadlock or serialization failure, or when the connection turned
    out dead before the commit was sent (nothing was written, so running it again is
    safe); the outbox worker is woken when it queued deliveries.  The one retry loop of
    the pipeline and of the flows that open their own short transactions."""
    for attempt in range(_TRANSIENT_RETRIES + 1):
        committing = False
        try:
            with ctx.db.write() if writes else ctx.db.read() as conn:
                done = work(conn)
                queued = bool(conn.info.pop(NEW_DELIVERIES, False))
                committing = True
            if queued:
                ctx.notify_new_events()
            return done
        except DBAPIError as exc:
            dead = exc.connection_invalidated and not committing
            if attempt == _TRANSIENT_RETRIES or not (is_transient(exc) or dead):
                raise
    raise AssertionError("the retry loop returns or raises on its last attempt")


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` mean psycopg 3, the driver we ship."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


class Database:
    def __init__(
        self, url: str, *, echo: bool = False, pool_size: int = 32, max_overflow: int = 8
    ) -> None:
        self.url = normalize_url(url)
        self.dialect = make_url(self.url).get_backend_name()
        self._pool_size, self._max_overflow = pool_size, max_overflow
        self.engine: Engine = self._make_engine(echo)
        #: SQLite has one writer at a time.  Writers of this process queue here, woken
        #: the moment the last one commits, instead of in SQLite's busy handler, which
        #: polls with sleeps of up to 100 ms (the tail latency under load); other
        #: processes still meet the file lock and its busy timeout.
        self._writer = threading.RLock() if self.is_sqlite else None

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def _make_engine(self, echo: bool) -> Engine:
        if self.is_sqlite:
            engine = create_engine(
                self.url,
                echo=echo,
                connect_args={"timeout": 30, "check_same_thread": False},
                pool_size=20,
                max_overflow=20,
            )
            event.listen(engine, "connect", _sqlite_on_connect)
            event.listen(engine, "begin", _sqlite_on_begin)
            return engine
        # No ``pool_pre_ping``: it costs a round trip on every checkout, i.e. on every
        # request.  A connection idle for a while is pinged instead (``_ping_if_idle``), and
        # one dropped while busy fails its transaction, which the pipeline runs again
        # (``endpoint._in_transaction``: SQLAlchemy has then invalidated the pool).
        # The pool keeps as many connections as the server's worker threads use at once
        # under load (anyio's 40 threads, some of them busy without the database): a
        # connection past ``pool_size`` is closed when returned, and opening a
        # PostgreSQL connection costs more than the request that needed it (at 32
        # concurrent clients, pool_size 10 had the server reconnecting all the time).
        engine = create_engine(
            self.url,
            echo=echo,
            pool_size=self._pool_size,
            max_overflow=self._max_overflow,
            pool_recycle=RECYCLE_SECONDS,
            connect_args={"connect_timeout": 5},
        )
        event.listen(engine, "checkin", _mark_idle)
        event.listen(engine, "checkout", _ping_if_idle)
        return engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that may write; committed on success, rolled back on error."""
        with self._writer or nullcontext(), self.engine.connect() as conn:
            conn.execution_options(svc_write=True)  # read by SQLite's BEGIN IMMEDIATE hook
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def ping(self) -> None:
        """Raise if the database cannot answer a trivial query."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()


def _mark_idle(_dbapi_connection: Any, record: Any) -> None:
    if record is not None:
        record.info["svc_idle_since"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """Ping a connection that sat in the pool longer than :data:`IDLE_PING_SECONDS`; a
    dead one raises ``DisconnectionError`` and the pool hands out a fresh connection."""
    since = record.info.get("svc_idle_since")
    if since is None or time.monotonic() - since < IDLE_PING_SECONDS:
        return
    try:
        with closing(dbapi_connection.cursor()) as cursor:
            cursor.execute("SELECT 1")
        dbapi_connection.rollback()
    except Exception as exc:
        raise DisconnectionError("the pooled connection is gone") from exc


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module so that we can issue
    # BEGIN IMMEDIATE ourselves (SQLAlchemy's documented pysqlite recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = "IMMEDIATE" if conn.get_execution_options().get("svc_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")

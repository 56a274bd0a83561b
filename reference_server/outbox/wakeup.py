"""Waking a worker the moment deliveries are committed, from any process.

Inside ``svc-server run`` the request that committed an event wakes its own process's
worker directly (``ServerContext.notify_new_events``).  Other processes learn of it
through PostgreSQL: the transaction that writes an outbox row also sends ``NOTIFY
svc_outbox`` (``domain/events.py``), which PostgreSQL delivers to every listening session
when -- and only if -- that transaction commits.  :func:`listen` keeps one such session
per worker and turns each notification into a wake-up, so a standalone ``svc-server
worker`` claims new deliveries within milliseconds instead of at its next poll.

SQLite has no notifications, but it counts commits: ``PRAGMA data_version`` on a
connection changes whenever another connection -- in any process -- has committed to the
file.  :func:`listen` reads it every :data:`SQLITE_WATCH_SECONDS` on a connection of its
own (a read of the shared WAL index, microseconds, no table touched); when it moved, it
reads the outbox's newest row id (the last entry of one b-tree) and wakes the worker only
if that moved too: a commit that queued deliveries, as PostgreSQL's ``NOTIFY`` says.  So
a worker in another process claims within ~10 ms of such a commit instead of at its next
poll, and the commits that queue nothing -- most of them: every payment, every claim and
outcome the worker records itself -- no longer each cost a round of claiming and payouts
(on a busy server that round ran up to 100 times a second).  Polling also stays on, for
retries that fall due on their schedule and for anything committed while the listening
session was being (re)opened.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

import anyio

from ..domain.events import OUTBOX_CHANNEL
from ..store import Database

__all__ = ["listen"]

log = logging.getLogger("reference_server.outbox")

#: Seconds between attempts to reopen a lost listening session (polling covers the gap).
RECONNECT_SECONDS = 1.0
#: Seconds between two looks at SQLite's commit counter.
SQLITE_WATCH_SECONDS = 0.01


async def listen(db: Database, wake: Callable[[], None]) -> None:
    """Call ``wake`` on every ``NOTIFY svc_outbox`` (PostgreSQL) or commit (SQLite) until
    cancelled.  The session is opened with the engine's own connection arguments, so it
    reaches the same database (and schema) as the worker's queries."""
    if db.is_sqlite:
        await _watch_sqlite(db, wake)
        return
    import psycopg

    cargs, cparams = db.engine.dialect.create_connect_args(db.engine.url)
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(*cargs, **cparams, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {OUTBOX_CHANNEL}")
                wake()  # whatever was committed before we listened
                async for _ in conn.notifies():
                    wake()
        except Exception:  # a lost session: say so, poll, reopen
            log.warning(
                "listening for new deliveries failed; polling until it works again", exc_info=True
            )
        await anyio.sleep(RECONNECT_SECONDS)


#: The outbox's newest row (``webhook_deliveries`` is never deleted from: its rowid only
#: grows, one per delivery queued).
_NEWEST_DELIVERY = "SELECT max(rowid) FROM webhook_deliveries"


async def _watch_sqlite(db: Database, wake: Callable[[], None]) -> None:
    """The SQLite side of :func:`listen` (the module says what it watches).

    Read on the event loop: the pragma only looks at the WAL index, the row id is one
    b-tree descent, done only after a commit.  The connection never waits for a lock
    (``timeout=0``): a look that meets one is skipped, the next one sees the commit.  An
    in-memory database is private to its process: nothing to watch.
    """
    cargs, cparams = db.engine.dialect.create_connect_args(db.engine.url)
    if not cargs or cargs[0] in ("", ":memory:") or "mode=memory" in str(cargs[0]):
        return
    cparams = {**cparams, "timeout": 0, "check_same_thread": False}
    while True:
        try:
            conn = sqlite3.connect(str(cargs[0]), **cparams)
        except sqlite3.Error:
            log.warning("watching the database for commits failed; polling", exc_info=True)
            await anyio.sleep(RECONNECT_SECONDS)
            continue
        try:
            seen: tuple[object, object] | None = None  # (data_version, newest delivery)
            while True:
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if seen is None or version != seen[0]:
                        newest = conn.execute(_NEWEST_DELIVERY).fetchone()[0]
                        if seen is not None and newest != seen[1]:
                            wake()
                        seen = (version, newest)
                except sqlite3.OperationalError:  # busy: look again next time
                    pass
                await anyio.sleep(SQLITE_WATCH_SECONDS)
        finally:
            conn.close()

"""Waking a worker the moment deliveries are committed, from any process.

Inside ``svc-server run`` the request that committed an event wakes its own process's
worker directly (``ServerContext.notify_new_events``).  Other processes learn of it
through PostgreSQL: the transaction that writes an outbox row also sends ``NOTIFY
svc_outbox`` (``domain/events.py``), which PostgreSQL delivers to every listening session
when -- and only if -- that transaction commits.  :func:`listen` keeps one such session
per worker and turns each notification into a wake-up, so a standalone ``svc-server
worker`` claims new deliveries within milliseconds instead of at its next poll.

SQLite has no cross-process notification: there, workers in other processes keep polling
every ``worker_poll_seconds``.  Polling also stays on with PostgreSQL, for retries that
fall due on their schedule and for anything committed while the listening session was
being (re)opened.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from ..domain.events import OUTBOX_CHANNEL
from ..store import Database

__all__ = ["listen"]

log = logging.getLogger("reference_server.outbox")

#: Seconds between attempts to reopen a lost listening session (polling covers the gap).
RECONNECT_SECONDS = 1.0


async def listen(db: Database, wake: Callable[[], None]) -> None:
    """Call ``wake`` on every ``NOTIFY svc_outbox`` until cancelled (PostgreSQL only;
    returns at once on SQLite).  The session is opened with the engine's own connection
    arguments, so it reaches the same database (and schema) as the worker's queries."""
    if db.is_sqlite:
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

"""Credential claims in the database: pympp's replay ``Store`` over ``rail_claims``.

pympp claims an authorization (``put_if_absent``) before it settles it, releases the claim
when settlement is refused (``delete``: the payer may retry the same authorization) and
records the transaction afterwards (``put``).  Its default store is per process; this one
is the service's database, so a credential settles once across every server process,
on SQLite and PostgreSQL alike: the claim is a primary-key insert, committed on its own
before settlement starts, and of many concurrent inserts exactly one succeeds.

Each call is one short transaction in a worker thread (database code is synchronous).
:attr:`ClaimStore.claimed` remembers the key this store claimed last, so that a caller
whose settlement failed for a reason pympp does not see (a database error after the
sandbox transfer rolled back) can release the claim itself.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import anyio.to_thread
from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ...store import Database
from ...store import tables as t

__all__ = ["ClaimStore", "purge_claims"]

_c = t.rail_claims


class ClaimStore:
    """pympp's ``mpp.store.Store`` protocol (``get``, ``put``, ``delete``,
    ``put_if_absent``) on the ``rail_claims`` table."""

    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.clock = clock
        self.claimed: str | None = None

    async def get(self, key: str) -> Any | None:
        return await anyio.to_thread.run_sync(self._get, key)

    async def put(self, key: str, value: Any) -> None:
        await anyio.to_thread.run_sync(self._put, key, str(value))

    async def delete(self, key: str) -> None:
        await anyio.to_thread.run_sync(self._delete, key)
        if self.claimed == key:
            self.claimed = None

    async def put_if_absent(self, key: str, value: Any) -> bool:
        claimed = await anyio.to_thread.run_sync(self._insert, key, str(value))
        if claimed:
            self.claimed = key
        return claimed

    def _get(self, key: str) -> str | None:
        with self.db.read() as conn:
            return conn.execute(select(_c.c.value).where(_c.c.key == key)).scalar()

    def _insert(self, key: str, value: str) -> bool:
        try:
            with self.db.write() as conn:
                conn.execute(insert(_c).values(key=key, value=value, created_at=self.clock()))
        except IntegrityError:
            return False
        return True

    def _put(self, key: str, value: str) -> None:
        with self.db.write() as conn:
            changed = conn.execute(update(_c).where(_c.c.key == key).values(value=value))
            if changed.rowcount == 0:
                conn.execute(insert(_c).values(key=key, value=value, created_at=self.clock()))

    def _delete(self, key: str) -> None:
        with self.db.write() as conn:
            conn.execute(delete(_c).where(_c.c.key == key))


def purge_claims(db: Database, *, before: datetime) -> int:
    """Forget claims made before ``before``; returns how many.

    A claim only has to outlive what it claims: pympp refuses an authorization past its
    ``validBefore`` (at most an hour ahead for x402, the challenge's expiry for MPP), and
    the chain refuses a spent nonce anyway, so an old claim guards nothing.  Unsettled
    holds stay until the chain decides them (:mod:`._unsettled`).
    """
    old = (_c.c.created_at < before) & ~_c.c.key.startswith("unsettled:")
    with db.write() as conn:
        return int(conn.execute(delete(_c).where(old)).rowcount)

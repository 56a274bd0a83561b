"""SQLite's commit watcher (``outbox/wakeup.py``) wakes a worker for a commit that queued
deliveries, and for no other: as PostgreSQL's ``NOTIFY``, which only such a commit sends.
Every commit woke it before, and each wake cost a round of claiming and payouts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

import svc
from reference_server.outbox.wakeup import SQLITE_WATCH_SECONDS, listen

from ..support import new_account


def test_the_sqlite_watcher_wakes_for_queued_deliveries_only(
    make_server: Any, tmp_path: Path
) -> None:
    """On an SQLite file in either leg: PostgreSQL's NOTIFY is sent only with deliveries
    already (the wake test in test_workers covers it)."""
    live = make_server(worker_enabled=False, database_url=f"sqlite:///{tmp_path / 'watch.db'}")
    acct = new_account(live.url)
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    wakes: list[float] = []
    woken = anyio.Event()

    def wake() -> None:
        wakes.append(time.monotonic())
        woken.set()

    def settle() -> None:  # several looks of the watcher
        time.sleep(SQLITE_WATCH_SECONDS * 20)

    async def main() -> None:
        async with anyio.create_task_group() as watching:
            watching.start_soon(listen, live.ctx.db, wake)
            await anyio.to_thread.run_sync(settle)
            # Commits that queue no delivery: an event nobody subscribed to, an endpoint.
            await anyio.to_thread.run_sync(owner.wallet_keys.fund, acct.wallet_key_id, "0.01")
            await anyio.to_thread.run_sync(owner.webhooks.create, "http://127.0.0.1:9/hook")
            await anyio.to_thread.run_sync(settle)
            assert wakes == []
            # A commit that queues one.
            await anyio.to_thread.run_sync(owner.wallet_keys.fund, acct.wallet_key_id, "0.01")
            with anyio.fail_after(5):
                await woken.wait()
            watching.cancel_scope.cancel()

    anyio.run(main)

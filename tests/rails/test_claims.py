"""pympp's replay store on ``rail_claims``: one claim per key across connections and
concurrent claimers, released on refusal, purged when old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from reference_server.domain.open_rails import purge_claims
from reference_server.domain.open_rails._claims import ClaimStore

from ..sandbox.helpers import migrated

pytestmark = pytest.mark.anyio
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


async def test_a_key_is_claimed_once_even_by_concurrent_claimers(database_url: str) -> None:
    with migrated(database_url) as db:
        stores = [ClaimStore(db, lambda: NOW) for _ in range(10)]
        results: list[bool] = []

        async def claim(store: ClaimStore) -> None:
            results.append(await store.put_if_absent("mpp:evm:authorization:1", "pending"))

        async with anyio.create_task_group() as tasks:
            for store in stores:
                tasks.start_soon(claim, store)
        assert sorted(results) == [False] * 9 + [True]
        [winner] = [store for store in stores if store.claimed]
        assert await winner.get("mpp:evm:authorization:1") == "pending"

        await winner.put("mpp:evm:authorization:1", "0xabc")  # settled: the reference
        assert await stores[0].get("mpp:evm:authorization:1") == "0xabc"
        await winner.delete("mpp:evm:authorization:1")  # a refused settlement releases it
        assert winner.claimed is None and await winner.get("mpp:evm:authorization:1") is None
        assert await stores[0].put_if_absent("mpp:evm:authorization:1", "pending")


async def test_old_claims_are_purged(database_url: str) -> None:
    with migrated(database_url) as db:
        old = ClaimStore(db, lambda: NOW - timedelta(days=2))
        fresh = ClaimStore(db, lambda: NOW)
        await old.put_if_absent("old", "0x1")
        await fresh.put_if_absent("fresh", "pending")
        assert purge_claims(db, before=NOW - timedelta(days=1)) == 1
        assert await fresh.get("old") is None and await fresh.get("fresh") == "pending"

"""Money under concurrency: no overspend, no lost or created money, on SQLite and
PostgreSQL, within one server process and across two sharing one database."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import svc

from ..support import LiveServer, assert_ledger_sound, server_processes
from .helpers import D, events_of, market


async def pay_many(urls: list[str], wallet_key: str, resource_id: str, n: int) -> Counter[str]:
    """Fire ``n`` payments at once, spread over ``urls``; count outcomes by code."""
    async with httpx.AsyncClient(timeout=120) as http:

        async def one(i: int) -> str:
            r = await http.post(
                urls[i % len(urls)] + "/pay",
                json={"resource_id": resource_id},
                headers={
                    "Authorization": f"Bearer {wallet_key}",
                    "Idempotency-Key": str(uuid.uuid4()),
                },
            )
            return "paid" if r.status_code == 200 else r.json()["error"]["code"]

        return Counter(await asyncio.gather(*(one(i) for i in range(n))))


def check_outcome(live: LiveServer, m: Any, outcome: Counter[str], paid: int) -> None:
    assert outcome["paid"] == paid, outcome
    assert m.agent.spend.balance().balance == D("100.00") - paid
    receipts = events_of(live, m.seller_owner_id, "payment.succeeded")
    assert len(receipts) == len({e["receipt_id"] for e in receipts}) == paid
    assert m.seller.sellers.balance().balance == paid * D("0.99")
    assert_ledger_sound(live)


@pytest.mark.anyio
async def test_two_hundred_payments_against_a_wallet_funded_for_one_hundred(
    server: LiveServer,
) -> None:
    m = market(server, price="1.00", fund="100.00")
    outcome = await pay_many([server.url], m.wallet_key, m.resource.id, 200)
    assert outcome == Counter({"paid": 100, "insufficient_funds": 100})
    check_outcome(server, m, outcome, 100)


@pytest.mark.anyio
async def test_allowance_holds_under_concurrency(server: LiveServer) -> None:
    m = market(server, price="1.00", fund="100.00", allowance="30.00", period="day")
    outcome = await pay_many([server.url], m.wallet_key, m.resource.id, 60)
    assert outcome == Counter({"paid": 30, "allowance_exceeded": 30})
    state = m.agent.spend.balance()
    assert state.spent_this_period == D("30.00") and state.remaining_allowance == D("0")
    check_outcome(server, m, outcome, 30)


@pytest.fixture
def two_processes(database_url: str, server: LiveServer) -> Iterator[list[str]]:
    """Two more server processes on the same database as ``server`` (migrated by it)."""
    with server_processes(database_url, 2) as urls:
        yield urls


@pytest.mark.anyio
async def test_payments_split_across_two_server_processes(
    server: LiveServer, two_processes: list[str]
) -> None:
    m = market(server, price="1.00", fund="100.00")
    outcome = await pay_many(two_processes, m.wallet_key, m.resource.id, 200)
    assert outcome == Counter({"paid": 100, "insufficient_funds": 100})
    check_outcome(server, m, outcome, 100)


@pytest.mark.anyio
async def test_one_idempotency_key_pays_once_across_processes(
    server: LiveServer, two_processes: list[str]
) -> None:
    m = market(server, price="1.00", fund="100.00")
    key = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=120) as http:
        responses = await asyncio.gather(
            *(
                http.post(
                    two_processes[i % 2] + "/pay",
                    json={"resource_id": m.resource.id},
                    headers={"Authorization": f"Bearer {m.wallet_key}", "Idempotency-Key": key},
                )
                for i in range(40)
            )
        )
    receipts = {r.json()["receipt_id"] for r in responses if r.status_code == 200}
    assert len(receipts) == 1
    assert {r.status_code for r in responses} <= {200, 409}
    with svc.Client(base_url=server.url, wallet_key=m.wallet_key) as agent:
        assert agent.spend.balance().balance == D("99.00")
    assert_ledger_sound(server)

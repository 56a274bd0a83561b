"""Open rails across server processes: replicas of one deployment (one database, one
public address) sharing every decision that keeps money right -- a credential pays once
whichever replica sees it, and one ``Idempotency-Key`` pays once whichever replica the
agent's retry reaches.  On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
import pytest
from eth_account.signers.local import LocalAccount

from ..payurl.helpers import make_agent
from ..sandbox.helpers import assert_chain_sound
from ..support import LiveServer, server_processes
from .helpers import (
    PRICE,
    RailShop,
    balance,
    events_of,
    fresh_credential,
    receipts_of,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def replicas(database_url: str, server: LiveServer) -> Iterator[list[str]]:
    """Two more processes serving ``server``'s database under ``server``'s public URL."""
    with server_processes(database_url, 2, public_url=server.url) as urls:
        yield urls


def _at(replica: str, public: str) -> str:
    """``public`` (a gate_url) as requested from one replica's own address."""
    parts = urlsplit(public)
    return replica + parts.path + (f"?{parts.query}" if parts.query else "")


async def test_one_credential_pays_once_across_replicas(
    server: LiveServer, shop: RailShop, payer: LocalAccount, replicas: list[str], protocol: str
) -> None:
    gate = shop.resource.gate_url
    credential = await fresh_credential(gate, payer, protocol)

    async with httpx.AsyncClient(timeout=60) as http:
        answers = await asyncio.gather(
            *(http.get(_at(replicas[i % 2], gate), headers=credential) for i in range(12))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [402] * 11, [a.text for a in answers if a.status_code != 402]
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert len(events_of(server, shop.owner_id, "payment.succeeded")) == 1
    assert shop.balance().balance == Decimal("0.2475")
    assert_chain_sound(server.ctx.db)


async def test_one_idempotency_key_pays_a_url_once_across_replicas(
    server: LiveServer, shop: RailShop, replicas: list[str]
) -> None:
    agent = make_agent(server, fund="1.00")
    key = str(uuid.uuid4())
    headers = {"Authorization": f"Bearer {agent.wallet_key}", "Idempotency-Key": key}
    body = {"url": shop.resource.gate_url}

    async with httpx.AsyncClient(timeout=60) as http:
        answers = await asyncio.gather(
            *(
                http.post(replicas[i % 2] + "/spend/pay-url", json=body, headers=headers)
                for i in range(6)
            )
        )
        # Whatever raced (409 while the first was in flight), the key settles to one answer.
        final = await http.post(replicas[1] + "/spend/pay-url", json=body, headers=headers)

    assert {a.status_code for a in answers} <= {200, 409}, [a.text for a in answers]
    assert final.status_code == 200, final.text
    paid = [a.json() for a in answers if a.status_code == 200] + [final.json()]
    assert {p["attempt_id"] for p in paid} == {final.json()["attempt_id"]}
    assert agent.spend().balance == Decimal("0.75")
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert shop.balance().balance == Decimal("0.2475")
    assert_chain_sound(server.ctx.db)

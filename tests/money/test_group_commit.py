"""``POST /pay``'s group commit: concurrent payments of one wallet key share one
transaction and are decided one by one, in order, with the answers, events and books
each would have had alone (SQLite and PostgreSQL).

To make a group for certain, the test holds the wallet key's lock (PostgreSQL's row
lock; on SQLite the database's write lock) while the requests arrive: the first one's
transaction waits on it, and the ones after queue behind it into the next group."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import select

import svc
from reference_server.domain import wallets
from reference_server.store import tables as t
from reference_server.web import strategies

from ..support import LiveServer, assert_ledger_sound
from .helpers import D, events_of, market


@contextmanager
def groups_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Each group decided in one transaction (``strategies.Grouped``), as the answers of
    the requests it ran ("paid" or a code; a replay is not run)."""
    seen: list[list[str]] = []
    real = strategies._in_one_transaction

    def spy(*args: Any) -> Any:
        answers = real(*args)
        seen.append(
            [
                "paid" if status == 200 else body["error"]["code"]
                for status, body, headers in answers
                if "Idempotent-Replayed" not in headers
            ]
        )
        return answers

    monkeypatch.setattr(strategies, "_in_one_transaction", spy)
    yield seen


async def pay_queued(
    live: LiveServer, wallet_key_id: str, wallet_key: str, payments_: list[tuple[str, str]]
) -> list[httpx.Response]:
    """``POST /pay`` each ``(resource_id, Idempotency-Key)`` in turn, 100 ms apart, while
    the key is locked: the first waits on the lock, the others queue behind it."""
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:

        async def pay(resource_id: str, key: str) -> httpx.Response:
            return await http.post(
                "/pay",
                json={"resource_id": resource_id},
                headers={"Authorization": f"Bearer {wallet_key}", "Idempotency-Key": key},
            )

        with live.ctx.db.write() as conn:
            wallets.lock_wallet_key(conn, wallet_key_id)
            sent = []
            for resource_id, key in payments_:
                sent.append(asyncio.ensure_future(pay(resource_id, key)))
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)
        return list(await asyncio.gather(*sent))


@pytest.mark.anyio
async def test_a_group_decides_in_order_and_a_refusal_stays_alone(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = market(server, price="1.00", fund="3.00")
    big = m.seller.resources.create(kind="http", path="/v1/big", amount="5.00")
    small = m.resource.id
    with groups_seen(monkeypatch) as seen:
        first, *group = await pay_queued(
            server,
            m.wallet_key_id,
            m.wallet_key,
            [(small, "k0"), (small, "k1"), (big.id, "k2"), (small, "k3"), (small, "k0")],
        )
    # k0 ran alone; k1, k2 and k3 in one group, k0 again replayed in it.
    assert seen == [["paid"], ["paid", "insufficient_funds", "paid"]]
    paid1, refused, paid3, replayed = group
    assert [r.status_code for r in (first, paid1, paid3, replayed)] == [200] * 4
    assert refused.status_code == 402
    assert refused.json()["error"]["code"] == "insufficient_funds"
    # What the refusal says is what it would have said alone: 1.00 left after k1.
    assert refused.json()["error"]["details"] == {"available": "1.00", "amount": "5.00"}
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.json()["receipt_id"] == first.json()["receipt_id"]
    receipts = {r.json()["receipt_id"] for r in (first, paid1, paid3)}
    assert len(receipts) == 3

    assert m.agent.spend.balance().balance == D("0.00")
    assert m.agent.spend.balance().spent_total == D("3.00")
    assert m.seller.sellers.balance().balance == 3 * D("0.99")
    succeeded = events_of(server, m.seller_owner_id, "payment.succeeded")
    assert {e["receipt_id"] for e in succeeded} == receipts
    # Each sale's event tells the seller's balance right after it, in order.
    assert [e["seller_balance"] for e in succeeded] == ["0.99", "1.98", "2.97"]
    assert [e["request_id"] for e in succeeded[1:]] == [
        paid1.json()["request_id"],
        paid3.json()["request_id"],
    ]
    failed = events_of(server, _wallet_owner(server, m.wallet_key_id), "payment.failed")
    assert [(e["reason"], e["request_id"], e["amount"]) for e in failed] == [
        ("insufficient_funds", refused.json()["request_id"], "5.00")
    ]
    assert_ledger_sound(server)

    # Each answer is stored under its own key: a retry is answered the same.
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        for key, answer in (("k1", paid1), ("k2", refused), ("k3", paid3)):
            again = await http.post(
                "/pay",
                json={"resource_id": big.id if key == "k2" else small},
                headers={"Authorization": f"Bearer {m.wallet_key}", "Idempotency-Key": key},
            )
            assert again.status_code == answer.status_code
            assert again.headers["Idempotent-Replayed"] == "true"
            body, first_body = again.json(), answer.json()
            body.pop("request_id", None)
            first_body.pop("request_id", None)
            assert body == first_body
    assert m.agent.spend.balance().spent_total == D("3.00")


@pytest.mark.anyio
async def test_a_group_with_a_failing_request_runs_request_by_request(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown resource (404) and a key sent twice in one group: the group's
    transaction rolls back and each request runs alone, answered as it would be."""
    m = market(server, price="1.00", fund="10.00")
    small = m.resource.id
    with groups_seen(monkeypatch) as seen:
        _, paid, missing, twin1, twin2 = await pay_queued(
            server,
            m.wallet_key_id,
            m.wallet_key,
            [(small, "a0"), (small, "a1"), ("res_nope", "a2"), (small, "tw"), (small, "tw")],
        )
    assert seen == [["paid"]]  # a0 alone; the 404 rolled the next group back
    assert paid.status_code == 200
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert twin1.status_code == twin2.status_code == 200
    assert twin1.json()["receipt_id"] == twin2.json()["receipt_id"]
    assert m.agent.spend.balance().balance == D("7.00")  # a0, a1 and tw, once
    assert len(events_of(server, m.seller_owner_id, "payment.succeeded")) == 3
    assert_ledger_sound(server)


@pytest.mark.anyio
async def test_a_group_refused_by_policy_counts_only_what_it_paid(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = market(server, price="1.00", fund="10.00", allowance="2.00", period="day")
    small = m.resource.id
    with groups_seen(monkeypatch) as seen:
        answers = await pay_queued(
            server, m.wallet_key_id, m.wallet_key, [(small, f"p{i}") for i in range(5)]
        )
    refused = ["allowance_exceeded"] * 3
    assert seen == [["paid"], ["paid", *refused]]
    assert [r.status_code for r in answers] == [200, 200, 402, 402, 402]
    state = m.agent.spend.balance()
    assert state.spent_this_period == D("2.00") and state.balance == D("8.00")
    assert_ledger_sound(server)


def _wallet_owner(live: LiveServer, wallet_key_id: str) -> str:
    with live.ctx.db.read() as conn:
        return str(wallets.get_wallet_key(conn, wallet_key_id).owner_id)


def test_a_lone_payment_queues_a_delivery_only_where_an_endpoint_wants_it(
    server: LiveServer,
) -> None:
    """A payment reads with its resource whether the seller's owner has an enabled
    webhook endpoint, and reads the endpoints only then: each case still queues exactly
    the deliveries its ``payment.succeeded`` is due."""
    m = market(server, price="1.00", fund="10.00")
    seller_owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")

    def deliveries_of(receipt_id: str) -> list[str]:
        """The endpoints the receipt's ``payment.succeeded`` was queued for."""
        with server.ctx.db.read() as conn:
            rows = conn.execute(
                select(t.webhook_deliveries.c.endpoint_id)
                .join(t.events, t.events.c.id == t.webhook_deliveries.c.event_id)
                .where(
                    t.events.c.type == "payment.succeeded",
                    t.events.c.data["receipt_id"].as_string() == receipt_id,
                )
            ).all()
        return [row.endpoint_id for row in rows]

    assert deliveries_of(m.agent.pay(resource_id=m.resource.id).receipt_id) == []
    wanted = seller_owner.webhooks.create("http://127.0.0.1:9/a", events=["payment.succeeded"])
    seller_owner.webhooks.create("http://127.0.0.1:9/b", events=["payment.failed"])
    assert deliveries_of(m.agent.pay(resource_id=m.resource.id).receipt_id) == [wanted.id]
    seller_owner.webhooks.update(wanted.id, status="disabled")
    assert deliveries_of(m.agent.pay(resource_id=m.resource.id).receipt_id) == []
    assert m.agent.spend.balance().balance == D("7.00")
    assert_ledger_sound(server)


def test_a_lone_payment_retried_is_replayed_and_pays_once(server: LiveServer) -> None:
    """A lone request claims its key with its answer, at the end of its transaction: a
    retry finds the key there only then, rolls back what it did and is answered from
    the record, as a retry of a grouped request is (refusals too)."""
    m = market(server, price="1.00", fund="1.50")
    big = m.seller.resources.create(kind="http", path="/v1/big", amount="5.00")
    headers = {"Authorization": f"Bearer {m.wallet_key}"}

    def pay(resource_id: str, key: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/pay",
            json={"resource_id": resource_id},
            headers={**headers, "Idempotency-Key": key},
        )

    paid, refused = pay(m.resource.id, "once"), pay(big.id, "no")
    assert (paid.status_code, refused.status_code) == (200, 402)
    for key, resource_id, first in (("once", m.resource.id, paid), ("no", big.id, refused)):
        again = pay(resource_id, key)
        assert again.status_code == first.status_code
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.headers["Original-Request-Id"] == first.json()["request_id"]
        assert {**again.json(), "request_id": None} == {**first.json(), "request_id": None}
    reused = pay(big.id, "once")
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"

    assert m.agent.spend.balance().balance == D("0.50")
    assert m.agent.spend.balance().spent_total == D("1.00")
    succeeded = events_of(server, m.seller_owner_id, "payment.succeeded")
    assert [e["receipt_id"] for e in succeeded] == [paid.json()["receipt_id"]]
    failed = events_of(server, _wallet_owner(server, m.wallet_key_id), "payment.failed")
    assert [e["request_id"] for e in failed] == [refused.json()["request_id"]]
    assert_ledger_sound(server)

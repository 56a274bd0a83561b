"""Metered resources on the ledger rail: ``POST /pay`` holds the maximum, the seller
captures what was used (``POST /receipts/{id}/capture``), the rest goes back; zero
units, or an authorization never captured, release it.  ``GET /receipts/{id}`` reads
the outcome, for the payer and the seller only."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest

import svc
from reference_server.domain import metered

from ..support import LiveServer, new_account
from .helpers import D, Market, events_of, market

#: 0.0001 a token, at most 0.50: 137 tokens cost 0.0137.
METERED = {"pricing": "metered", "unit_price": "0.0001", "unit": "token", "max_amount": "0.50"}


def metered_market(live: LiveServer, **policy: Any) -> tuple[Market, svc.Resource]:
    """The market's seller selling a metered resource too; its agent funded with 100."""
    m = market(live, **policy)
    resource = m.seller.resources.create(kind="http", path="/v1/chat", **METERED)
    return m, resource


def capture(
    live: LiveServer, m: Market, receipt_id: str, units: int, key: str | None = None
) -> httpx.Response:
    return httpx.post(
        f"{live.url}/receipts/{receipt_id}/capture",
        json={"units": units},
        headers={
            "Authorization": f"Bearer {m.seller_key}",
            "Idempotency-Key": key or str(uuid.uuid4()),
        },
    )


def read(live: LiveServer, receipt_id: str, credential: str, env: str = "test") -> httpx.Response:
    headers = {"Authorization": f"Bearer {credential}", "X-Svc-Environment": env}
    return httpx.get(f"{live.url}/receipts/{receipt_id}", headers=headers)


def test_hold_then_capture_charges_what_was_used(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    assert paid.amount == D("0.50")
    # held: the maximum is out of the available balance and counts against the policy;
    # the seller has nothing yet, and no payment.succeeded was sent
    assert m.agent.spend.balance().balance == D("99.50")
    assert m.agent.spend.balance().spent_this_period == D("0.50")
    assert m.seller.sellers.balance().balance == D("0")
    assert events_of(server, m.seller_owner_id, "payment.succeeded") == []
    held = read(server, paid.receipt_id, m.wallet_key).json()
    assert held["status"] == "authorized" and held["amount"] == "0.50"
    assert held["max_amount"] == "0.50" and held["units"] is None

    r = capture(server, m, paid.receipt_id, 137)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["status"], body["amount"], body["units"]) == ("settled", "0.0137", 137)
    assert body["max_amount"] == "0.50" and body["unit"] == "token"
    assert body["settled_at"] is not None

    fee = D("0.000137")  # 1 % of what was used
    assert m.seller.sellers.balance().balance == D("0.0137") - fee
    left = m.agent.spend.balance()
    assert left.balance == D("99.9863") and left.spent_this_period == D("0.0137")
    [event] = events_of(server, m.seller_owner_id, "payment.succeeded")
    assert event["receipt_id"] == paid.receipt_id and event["amount"] == "0.0137"
    assert event["platform_fee"] == "0.000137"


def test_zero_units_release_the_hold(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    r = capture(server, m, paid.receipt_id, 0)
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["amount"], r.json()["units"]) == ("released", "0.00", 0)
    left = m.agent.spend.balance()
    assert left.balance == D("100.00") and left.spent_this_period == D("0")
    assert m.seller.sellers.balance().balance == D("0")
    assert events_of(server, m.seller_owner_id, "payment.succeeded") == []


def test_capturing_twice_is_refused_but_a_replay_is_answered_again(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    first = capture(server, m, paid.receipt_id, 10, key="capture-once")
    assert first.status_code == 200, first.text
    again = capture(server, m, paid.receipt_id, 10, key="capture-once")
    assert again.status_code == 200
    assert {**again.json(), "request_id": None} == {**first.json(), "request_id": None}
    second = capture(server, m, paid.receipt_id, 10)
    assert second.status_code == 409, second.text
    assert second.json()["error"]["code"] == "receipt_not_authorized"
    # another seller's capture does not learn the receipt exists
    other = new_account(server.url)
    r = httpx.post(
        f"{server.url}/receipts/{paid.receipt_id}/capture",
        json={"units": 1},
        headers={"Authorization": f"Bearer {other.seller_key}", "Idempotency-Key": "x"},
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_twenty_concurrent_captures_capture_once(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    answers: list[httpx.Response] = []
    start = threading.Barrier(20)

    def one() -> None:
        start.wait()
        answers.append(capture(server, m, paid.receipt_id, 137))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] + [409] * 19, [r.text for r in answers if r.status_code not in (200, 409)]
    assert m.agent.spend.balance().balance == D("99.9863")
    assert len(events_of(server, m.seller_owner_id, "payment.succeeded")) == 1


def test_the_policy_checks_the_maximum(server: LiveServer) -> None:
    m, resource = metered_market(server, max_per_tx="0.10")
    with pytest.raises(svc.APIError) as refused:
        m.agent.pay(resource_id=resource.id)  # 0.50 may be charged: above 0.10
    assert refused.value.code == "max_per_tx_exceeded"
    m2, resource2 = metered_market(server, allowance="1.00", period="day")
    m2.agent.pay(resource_id=resource2.id)
    m2.agent.pay(resource_id=resource2.id)
    with pytest.raises(svc.APIError) as over:
        m2.agent.pay(resource_id=resource2.id)  # two maxima held: 1.00 of 1.00 counted
    assert over.value.code == "allowance_exceeded"


def test_the_sweep_releases_authorizations_never_captured(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    now = server.ctx.now()
    assert metered.expire_authorizations(server.ctx.db, now=now) == 0  # not stale yet
    later = now + metered.AUTHORIZATION_TTL + timedelta(seconds=1)
    assert metered.expire_authorizations(server.ctx.db, now=later) == 1
    assert read(server, paid.receipt_id, m.wallet_key).json()["status"] == "released"
    assert m.agent.spend.balance().balance == D("100.00")
    assert capture(server, m, paid.receipt_id, 5).status_code == 409


def test_a_metered_receipt_unlocks_until_captured(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    held = m.seller.access.verify(paid.receipt_id, resource.id)
    assert held.valid
    assert capture(server, m, paid.receipt_id, 3).status_code == 200
    used = m.seller.access.verify(paid.receipt_id, resource.id)
    assert not used.valid and "captured" in (used.reason or "")
    released = m.agent.pay(resource_id=resource.id)
    capture(server, m, released.receipt_id, 0)
    gone = m.seller.access.verify(released.receipt_id, resource.id)
    assert not gone.valid and "released" in (gone.reason or "")


def test_a_receipt_is_read_by_its_payer_and_its_seller_only(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    rid = paid.receipt_id
    for credential in (m.wallet_key, m.seller_key, m.owner_jwt, m.seller_owner_jwt):
        r = read(server, rid, credential)
        assert r.status_code == 200, r.text
        assert r.json()["id"] == rid and r.json()["environment"] == "test"
        # the seller's id is the seller's: its payer reads the (public) resource only
        seller_side = credential in (m.seller_key, m.seller_owner_jwt)
        assert r.json()["seller_id"] == (m.seller_id if seller_side else None)
    other = new_account(server.url)
    other_owner = svc.Client(base_url=server.url, owner_jwt=other.owner_jwt, environment="test")
    other_key = other_owner.wallet_keys.create(name="other").key
    for credential, env in (
        (other.seller_key, "test"),  # another seller
        (other_key, "test"),  # another owner's wallet key
        (other.owner_jwt, "test"),  # another owner
        (m.owner_jwt, "live"),  # the payer's owner, in the other environment
    ):
        r = read(server, rid, credential, env)
        assert r.status_code == 404, (credential[:12], r.text)
        assert r.json()["error"]["code"] == "not_found"
    # a fixed-price receipt reads as settled, with its amount
    fixed = m.agent.pay(resource_id=m.resource.id)
    body = read(server, fixed.receipt_id, m.wallet_key).json()
    assert (body["status"], body["amount"], body["units"]) == ("settled", "1.00", None)


@pytest.mark.anyio
async def test_the_sdk_captures_and_reads_receipts(server: LiveServer) -> None:
    m, resource = metered_market(server)
    paid = m.agent.pay(resource_id=resource.id)
    assert m.agent.receipts.get(paid.receipt_id).status == "authorized"
    captured = m.seller.receipts.capture(paid.receipt_id, units=137)
    assert (captured.status, captured.amount, captured.units) == ("settled", D("0.0137"), 137)
    async with svc.AsyncClient(base_url=server.url, seller_key=m.seller_key) as seller:
        read_back = await seller.receipts.get(paid.receipt_id)
        assert read_back.amount == D("0.0137") and read_back.max_amount == D("0.50")
        with pytest.raises(svc.APIError) as twice:
            await seller.receipts.capture(paid.receipt_id, units=1)
    assert twice.value.code == "receipt_not_authorized"


def test_concurrent_metered_payments_of_one_key_each_hold_the_maximum(server: LiveServer) -> None:
    """Concurrent ``POST /pay`` of one key are grouped; metered ones are each held."""
    m, resource = metered_market(server)
    with ThreadPoolExecutor(8) as pool:
        paid = list(pool.map(lambda _: m.agent.pay(resource_id=resource.id), range(8)))
    assert len({p.receipt_id for p in paid}) == 8
    statuses = {read(server, p.receipt_id, m.wallet_key).json()["status"] for p in paid}
    assert statuses == {"authorized"}
    assert m.agent.spend.balance().balance == D("96.00")

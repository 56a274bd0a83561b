"""Refunds on the ledger rail (``POST /refunds``) and a payment's state
(``GET /payments/{id}``): full and partial, never more than was paid (also when 20
refunds race), the seller's balance never below zero, the payer's policy given back,
``payment.refunded`` to both owners; the ledger audit stays sound (every server test
ends with it)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select

import svc
from reference_server.store import tables as t
from svc import webhooks

from ..payouts.helpers import onboard, shop
from ..support import LiveServer, at_once, new_account
from ..webhooks.receiver import Receiver
from .helpers import D, Market, events_of, market
from .test_metered import capture, metered_market


def refund(
    live: LiveServer, m: Market, receipt_id: str, amount: str | None = None, **extra: Any
) -> httpx.Response:
    body: dict[str, Any] = {"receipt_id": receipt_id, **extra}
    if amount is not None:
        body["amount"] = amount
    return httpx.post(
        f"{live.url}/refunds",
        json=body,
        headers={"Authorization": f"Bearer {m.seller_key}", "Idempotency-Key": str(uuid.uuid4())},
    )


def state(live: LiveServer, receipt_id: str, credential: str, env: str = "test") -> httpx.Response:
    headers = {"Authorization": f"Bearer {credential}", "X-Svc-Environment": env}
    return httpx.get(f"{live.url}/payments/{receipt_id}", headers=headers)


def code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


def test_a_full_refund_gives_everything_back(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    assert m.seller.sellers.balance().balance == D("0.99")  # 1 % platform fee
    assert state(server, paid.receipt_id, m.wallet_key).json()["state"] == "settled"

    r = refund(server, m, paid.receipt_id, reason="requested_by_customer")
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["amount"], body["status"], body["receipt_id"]) == (
        "1.00",
        "succeeded",
        paid.receipt_id,
    )
    assert body["reason"] == "requested_by_customer" and body["id"].startswith("rfnd_")
    # the payer has all of it back, its allowance too; the seller and the platform
    # gave back their shares
    left = m.agent.spend.balance()
    assert left.balance == D("100.00") and left.spent_this_period == D("0")
    assert m.seller.sellers.balance().balance == D("0")
    for credential in (m.wallet_key, m.seller_key, m.owner_jwt, m.seller_owner_jwt):
        s = state(server, paid.receipt_id, credential)
        assert s.status_code == 200, s.text
        assert (s.json()["state"], s.json()["refunded"], s.json()["remaining"]) == (
            "refunded",
            "1.00",
            "0.00",
        )
    again = refund(server, m, paid.receipt_id)
    assert again.status_code == 409 and code(again) == "refund_exceeds_payment"
    # refunded in full, the receipt opens the seller's gate no more
    verdict = m.seller.access.verify(paid.receipt_id, m.resource.id)
    assert (verdict.valid, verdict.reason) == (False, "receipt refunded")
    # the event, to the seller's owner and to the payer's
    for owner_id in (m.seller_owner_id, _owner_of(server, m)):
        [event] = events_of(server, owner_id, "payment.refunded")
        assert event["receipt_id"] == paid.receipt_id and event["refund_id"] == body["id"]
        assert (event["amount"], event["refunded"], event["remaining"]) == ("1.00", "1.00", "0.00")


def test_partial_refunds_add_up_to_the_payment_and_no_more(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    assert refund(server, m, paid.receipt_id, "0.30").status_code == 201
    s = state(server, paid.receipt_id, m.owner_jwt).json()
    assert (s["state"], s["amount"], s["refunded"], s["remaining"]) == (
        "refunded",
        "1.00",
        "0.30",
        "0.70",
    )
    over = refund(server, m, paid.receipt_id, "0.71")
    assert over.status_code == 409 and code(over) == "refund_exceeds_payment"
    assert over.json()["error"]["details"]["remaining"] == "0.70"
    rest = refund(server, m, paid.receipt_id)  # no amount: all that is left
    assert rest.status_code == 201 and rest.json()["amount"] == "0.70"
    assert m.agent.spend.balance().balance == D("100.00")
    assert m.seller.sellers.balance().balance == D("0")
    zero = refund(server, m, paid.receipt_id, "0")
    assert zero.status_code == 422 and code(zero) == "validation_error"


def test_twenty_concurrent_partial_refunds_never_pass_the_payment(server: LiveServer) -> None:
    m = market(server, price="1.00")
    paid = m.agent.pay(resource_id=m.resource.id)
    m.agent.pay(resource_id=m.resource.id)  # the seller's balance covers every refund
    answers = at_once(20, lambda: refund(server, m, paid.receipt_id, "0.15"))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] * 6 + [409] * 14, [r.text for r in answers if r.status_code >= 500]
    assert {code(r) for r in answers if r.status_code == 409} == {"refund_exceeds_payment"}
    s = state(server, paid.receipt_id, m.seller_key).json()
    assert (s["refunded"], s["remaining"]) == ("0.90", "0.10")
    assert m.agent.spend.balance().balance == D("98.90")
    assert len(events_of(server, m.seller_owner_id, "payment.refunded")) == 6


def test_a_refund_never_takes_the_seller_below_zero(server: LiveServer) -> None:
    s = shop(server)  # one sale of 10.00: a balance of 9.90
    onboard(s)
    assert s.withdraw().status_code == 201  # all of it, held at once
    [receipt] = _receipts_of(server, s.acct.seller_id)
    r = s.post("/refunds", {"receipt_id": receipt}, **{"Idempotency-Key": "r1"})
    assert r.status_code == 409 and code(r) == "insufficient_balance", r.text
    assert r.json()["error"]["details"] == {"available": "0.00", "needed": "9.90"}
    assert s.balance() == D("0.00")
    paid = state(server, receipt, s.acct.seller_key).json()
    assert (paid["state"], paid["refunded"]) == ("settled", "0.00")  # nothing moved


def test_strangers_and_other_sellers_see_no_payment(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    other = new_account(server.url)
    for credential, env in (
        (other.seller_key, "test"),
        (other.wallet_key, "test"),
        (other.owner_jwt, "test"),
        (m.owner_jwt, "live"),
    ):
        r = state(server, paid.receipt_id, credential, env)
        assert r.status_code == 404 and code(r) == "not_found", r.text
    r = httpx.post(
        f"{server.url}/refunds",
        json={"receipt_id": paid.receipt_id},
        headers={"Authorization": f"Bearer {other.seller_key}", "Idempotency-Key": "x"},
    )
    assert r.status_code == 404 and code(r) == "not_found"
    mine = refund(server, m, paid.receipt_id, "0.10").json()
    r = httpx.get(
        f"{server.url}/refunds/{mine['id']}",
        headers={"Authorization": f"Bearer {other.seller_key}"},
    )
    assert r.status_code == 404
    listed = httpx.get(
        f"{server.url}/refunds", headers={"Authorization": f"Bearer {other.seller_key}"}
    )
    assert listed.json()["data"] == []


def test_metered_states_claimed_settled_released(server: LiveServer) -> None:
    m, resource = metered_market(server)
    held = m.agent.pay(resource_id=resource.id)
    s = state(server, held.receipt_id, m.wallet_key).json()
    assert (s["state"], s["amount"]) == ("claimed", "0.50")
    early = refund(server, m, held.receipt_id)
    assert early.status_code == 409 and code(early) == "payment_not_settled"
    assert capture(server, m, held.receipt_id, 100).status_code == 200
    s = state(server, held.receipt_id, m.wallet_key).json()
    assert (s["state"], s["amount"], s["remaining"]) == ("settled", "0.01", "0.01")
    assert refund(server, m, held.receipt_id).status_code == 201
    assert m.agent.spend.balance().balance == D("100.00")
    nothing = m.agent.pay(resource_id=resource.id)
    assert capture(server, m, nothing.receipt_id, 0).status_code == 200
    assert state(server, nothing.receipt_id, m.seller_key).json()["state"] == "released"


def test_payment_refunded_is_delivered_signed(server: LiveServer, receiver: Receiver) -> None:
    m = market(server)
    endpoint = m.owner.webhooks.create(receiver.url, events=["payment.refunded"])  # the payer's
    paid = m.agent.pay(resource_id=m.resource.id)
    made = m.seller.refunds.create(paid.receipt_id, amount="0.40", reason="partial")
    [got] = receiver.wait_for(1)
    event = webhooks.verify(endpoint.signing_secret, got.body, got.headers)
    assert event.type == "payment.refunded" and isinstance(event.data, svc.PaymentRefundedData)
    assert (event.data.receipt_id, event.data.refund_id) == (paid.receipt_id, made.id)
    assert (event.data.amount, event.data.remaining) == (D("0.40"), D("0.60"))
    assert event.data.wallet_key_id == m.wallet_key_id and event.data.reason == "partial"


@pytest.mark.anyio
async def test_the_sdk_refunds_lists_and_reads(server: LiveServer) -> None:
    m = market(server)
    first = m.agent.pay(resource_id=m.resource.id)
    second = m.agent.pay(resource_id=m.resource.id)
    made = m.seller.refunds.create(first.receipt_id, amount="0.25", reason="late")
    assert isinstance(made, svc.Refund) and made.amount == D("0.25")
    async with svc.AsyncClient(base_url=server.url, seller_key=m.seller_key) as seller:
        other = await seller.refunds.create(second.receipt_id)
        assert other.amount == D("1.00")
        page = await seller.refunds.list(limit=1)
        assert [r.id for r in page.data] == [other.id] and page.has_more
        assert (await seller.refunds.get(made.id)).reason == "late"
    everything = [r.id for r in m.seller.refunds.list_all()]
    assert everything == [other.id, made.id]
    assert [r.id for r in m.seller.refunds.list(limit=1).data] == [other.id]
    assert m.seller.refunds.get(other.id).receipt_id == second.receipt_id
    async with svc.AsyncClient(base_url=server.url, wallet_key=m.wallet_key) as agent:
        whole = await agent.payments.get(second.receipt_id)
        assert (whole.state, whole.refunded, whole.remaining) == ("refunded", D("1.00"), D("0"))
    payment = m.agent.payments.get(first.receipt_id)
    assert isinstance(payment, svc.Payment)
    assert (payment.state, payment.refunded, payment.remaining) == (
        "refunded",
        D("0.25"),
        D("0.75"),
    )


def _owner_of(live: LiveServer, m: Market) -> str:
    """The payer's owner (the agents' account)."""
    w = t.wallet_keys
    with live.ctx.db.read() as conn:
        return str(conn.execute(select(w.c.owner_id).where(w.c.id == m.wallet_key_id)).scalar_one())


def _receipts_of(live: LiveServer, seller_id: str) -> list[str]:
    r = t.receipts
    with live.ctx.db.read() as conn:
        return list(conn.execute(select(r.c.id).where(r.c.seller_id == seller_id)).scalars())

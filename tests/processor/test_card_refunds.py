"""Card refunds in live through the processor (``tests.stripe_double`` in front of
localstripe): ``POST /refunds`` of a card payment holds its money and answers ``pending``;
the worker asks the processor for a refund of its PaymentIntent, outside any transaction,
under a key derived from our refund id (a retry never refunds twice); the refund is booked
back to the processor's clearing account when the processor says ``succeeded``, stays
held while ``pending`` and then is booked or, ``failed`` or refused, puts the money back;
the ledger audit stays sound (the fixture ends with it)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import select, update

from reference_server.domain import ledger
from reference_server.store import tables as t
from reference_server.timeutil import as_utc

from ..buypage.helpers import Item, item
from ..support import LiveServer, until
from .helpers import deliver, event
from .test_checkout import PAYING, _checkout, _events, _session_of, _settled, _start
from .test_checkout import server as server  # the live server with the processor

_CARD_REFUNDS = "/v1/refunds"


def _paid(live: LiveServer, stripe_double: Any, amount: str = "4.00") -> tuple[Item, str, str]:
    """A live card payment booked: the item, its receipt and its PaymentIntent."""
    it = item(live, environment="live", amount=amount)
    cs = _session_of(_start(it).headers["location"])
    intent = stripe_double.pay_checkout(cs, PAYING)["object"]["payment_intent"]
    receipt_id = until(lambda: _checkout(live, cs).receipt_id)
    return it, str(receipt_id), str(intent)


def _refund(it: Item, receipt_id: str, amount: str | None, key: str | None = None) -> Any:
    body: dict[str, Any] = {"receipt_id": receipt_id}
    if amount is not None:
        body["amount"] = amount
    headers = {**it.seller, "Idempotency-Key": key or str(uuid.uuid4())}
    return httpx.post(it.live.url + "/refunds", json=body, headers=headers, timeout=30)


def _refund_posts(stripe_double: Any) -> list[dict[str, Any]]:
    return [
        r for r in stripe_double.requests() if r["method"] == "POST" and r["path"] == _CARD_REFUNDS
    ]


def _state(it: Item, receipt_id: str) -> dict[str, Any]:
    r = httpx.get(f"{it.live.url}/payments/{receipt_id}", headers=it.seller)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _concluded(it: Item, refund_id: str) -> dict[str, Any]:
    """The refund once the worker and the processor have decided it."""

    def decided() -> dict[str, Any] | None:
        r = httpx.get(f"{it.live.url}/refunds/{refund_id}", headers=it.seller)
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body if body["status"] != "pending" else None

    return until(decided, f"refund {refund_id} still pending")


def _available(it: Item) -> int:
    with it.live.ctx.db.read() as conn:
        acct = ledger.account_id(
            conn, environment="live", kind=ledger.SELLER_BALANCE, ref_id=it.acct.seller_id
        )
        assert acct is not None
        return ledger.available_micros(conn, acct)


def test_a_live_card_payment_is_refunded_by_the_processor_once(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, intent = _paid(server, stripe_double)
    assert it.balance() == Decimal("3.96")

    part = _refund(it, receipt_id, "1.00")
    assert part.status_code == 201, part.text
    assert (part.json()["status"], part.json()["amount"]) == ("pending", "1.00")
    assert it.balance() == Decimal("2.97")  # held at once: 0.99 from the seller
    refund_id = part.json()["id"]
    assert _concluded(it, refund_id)["status"] == "succeeded"
    (asked,) = _refund_posts(stripe_double)
    assert asked["idempotency_key"] == f"svc-refund-{refund_id}"
    at_processor = stripe_double.client("sk_test_cards").v1.payment_intents.retrieve(
        intent, params={"expand": ["latest_charge"]}
    )
    assert at_processor.latest_charge.amount_refunded == 100  # cents
    assert it.balance() == Decimal("2.97")  # 0.99 from the seller, 0.01 from the fee
    _settled(stripe_double, "charge.refunded")  # the processor's event changes nothing
    assert it.balance() == Decimal("2.97")
    assert _state(it, receipt_id)["refunded"] == "1.00"

    rest = _refund(it, receipt_id, None)
    assert rest.status_code == 201, rest.text
    assert rest.json()["amount"] == "3.00"
    assert _concluded(it, rest.json()["id"])["status"] == "succeeded"
    _settled(stripe_double, "charge.refunded", 2)
    assert it.balance() == Decimal("0")
    state = _state(it, receipt_id)
    assert (state["state"], state["remaining"]) == ("refunded", "0.00")
    refunded = [e for e in _events(server, "payment.refunded") if e["receipt_id"] == receipt_id]
    assert sorted(e["amount"] for e in refunded) == ["1.00", "3.00"]
    assert {e["rail"] for e in refunded} == {"card"}


def _retry_recorded(live: LiveServer, refund_id: str) -> bool:
    """Once the worker has asked: has it replaced its 2-minute lease by the 30 s retry?"""
    due = _row(live, refund_id).next_check_at
    return due is not None and as_utc(due) - live.ctx.now() < timedelta(seconds=60)


def _time_passes(live: LiveServer, refund_id: str) -> None:
    """The refund's retry is due now (rather than in 30 s)."""
    with live.ctx.db.write() as conn:
        conn.execute(
            update(t.refunds)
            .where(t.refunds.c.id == refund_id)
            .values(next_check_at=live.ctx.now())
        )


def test_the_processor_unreachable_keeps_the_refund_held_and_it_is_asked_again_once(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, _ = _paid(server, stripe_double, "2.00")
    stripe_double.fault(_CARD_REFUNDS, 500, times=3)  # the SDK's first try and 2 retries
    key = str(uuid.uuid4())
    asked = _refund(it, receipt_id, "0.50", key)
    assert asked.status_code == 201, asked.text
    refund_id = asked.json()["id"]
    until(lambda: len(_refund_posts(stripe_double)) == 3, "the worker never asked")

    until(lambda: _retry_recorded(server, refund_id), "no retry recorded")
    assert _row(server, refund_id).status == "pending"
    assert it.balance() == Decimal("1.485")  # held meanwhile, and the payment counts it
    assert _state(it, receipt_id)["refunded"] == "0.50"
    replay = _refund(it, receipt_id, "0.50", key)
    assert replay.json()["id"] == refund_id  # answered from our key, not made again

    _time_passes(server, refund_id)
    assert _concluded(it, refund_id)["status"] == "succeeded"
    posts = _refund_posts(stripe_double)
    assert len(posts) == 4
    assert {p["idempotency_key"] for p in posts} == {f"svc-refund-{refund_id}"}
    assert it.balance() == Decimal("1.485")
    (announced,) = _events(server, "payment.refunded")
    assert announced["refund_id"] == refund_id


def test_a_refund_the_processor_refuses_fails_and_gives_the_money_back(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, _ = _paid(server, stripe_double, "2.00")
    stripe_double.fault(_CARD_REFUNDS, 400)  # an invalid request: never retried
    r = _refund(it, receipt_id, "0.50")
    assert r.status_code == 201, r.text
    got = _concluded(it, r.json()["id"])
    assert got["status"] == "failed"
    assert len(_refund_posts(stripe_double)) == 1
    assert it.balance() == Decimal("1.98") and _available(it) == 1_980_000
    assert _state(it, receipt_id)["state"] == "settled"  # refundable again
    (failure,) = _events(server, "payment.refund_failed")
    assert failure["refund_id"] == got["id"] and "refused" in failure["failure_reason"]
    assert _events(server, "payment.refunded") == []
    again = _refund(it, receipt_id, "0.50")
    assert _concluded(it, again.json()["id"])["status"] == "succeeded"
    assert it.balance() == Decimal("1.485")


def test_the_processors_event_before_the_workers_record_finds_the_refund_by_its_metadata(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, _ = _paid(server, stripe_double, "2.00")
    stripe_double.fault(_CARD_REFUNDS, 500, times=3)  # the worker's answer is lost
    r = _refund(it, receipt_id, "0.50")
    refund_id = r.json()["id"]
    until(lambda: len(_refund_posts(stripe_double)) == 3, "the worker never asked")
    refund = {
        "id": "re_" + uuid.uuid4().hex[:14],
        "object": "refund",
        "status": "succeeded",
        "metadata": {"svc_refund_id": refund_id, "svc_receipt_id": receipt_id},
    }
    assert deliver(server.url, event("refund.updated", refund)).status_code == 200
    row = _row(server, refund_id)
    assert (row.status, row.processor_refund_id) == ("succeeded", refund["id"])
    assert it.balance() == Decimal("1.485")
    (announced,) = _events(server, "payment.refunded")
    assert announced["refund_id"] == refund_id


def test_a_card_refund_must_be_whole_cents(server: LiveServer, stripe_double: Any) -> None:
    it, receipt_id, _ = _paid(server, stripe_double, "2.00")
    r = _refund(it, receipt_id, "0.005")
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_error"
    assert _refund_posts(stripe_double) == [] and it.balance() == Decimal("1.98")


def _processor_says(
    live: LiveServer, processor_refund_id: str, status: str, *, in_charge: str | None = None
) -> None:
    """The processor's ``refund.updated``, or (``in_charge``: the PaymentIntent) a
    ``charge.refunded`` listing the refund, delivered twice."""
    refund = {"id": processor_refund_id, "object": "refund", "status": status}
    body = event("refund.updated", refund)
    if in_charge is not None:
        charge = {
            "id": "ch_" + uuid.uuid4().hex[:14],
            "object": "charge",
            "payment_intent": in_charge,
            "refunds": {"object": "list", "data": [refund]},
        }
        body = event("charge.refunded", charge)
    r = deliver(live.url, body)
    assert r.status_code == 200, r.text
    assert deliver(live.url, body).status_code == 200  # a redelivery changes nothing


def _row(live: LiveServer, refund_id: str) -> Any:
    with live.ctx.db.read() as conn:
        return conn.execute(select(t.refunds).where(t.refunds.c.id == refund_id)).one()


def _asked(live: LiveServer, refund_id: str) -> Any:
    """The refund's row once the worker has recorded the processor's ``pending``."""
    row = _row(live, refund_id)
    return row if row.processor_refund_id is not None else None


def test_a_pending_card_refund_is_held_then_booked_or_given_back(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, intent = _paid(server, stripe_double)
    stripe_double.pend_refunds(2)

    first = _refund(it, receipt_id, "1.00")
    assert first.status_code == 201, first.text
    assert first.json()["status"] == "pending"
    # held: not spendable (the balance the seller sees is what is available)
    assert it.balance() == Decimal("2.97") and _available(it) == 2_970_000
    assert _state(it, receipt_id)["refunded"] == "1.00"  # no second refund past the payment
    assert _events(server, "payment.refunded") == []
    with server.ctx.db.read() as conn:
        assert ledger.audit(conn, "live") == []  # the held refund counts as refunded
    row = until(lambda: _asked(server, first.json()["id"]), "the worker never asked")
    _processor_says(server, row.processor_refund_id, "succeeded", in_charge=intent)
    assert _row(server, row.id).status == "succeeded"
    assert it.balance() == Decimal("2.97") and _available(it) == 2_970_000
    (announced,) = _events(server, "payment.refunded")
    assert (announced["refund_id"], announced["amount"]) == (row.id, "1.00")

    second = _refund(it, receipt_id, "2.00")
    assert second.json()["status"] == "pending"
    assert it.balance() == Decimal("0.99") and _available(it) == 990_000
    other = until(lambda: _asked(server, second.json()["id"]), "the worker never asked")
    _processor_says(server, other.processor_refund_id, "failed")
    got = httpx.get(f"{server.url}/refunds/{other.id}", headers=it.seller).json()
    assert got["status"] == "failed"
    assert it.balance() == Decimal("2.97") and _available(it) == 2_970_000  # given back
    assert _state(it, receipt_id)["refunded"] == "1.00"
    assert len(_events(server, "payment.refunded")) == 1
    (failure,) = _events(server, "payment.refund_failed")
    assert (failure["refund_id"], failure["amount"], failure["refunded"]) == (
        other.id,
        "2.00",
        "1.00",
    )
    assert failure["failure_reason"]


def _made_long_ago(live: LiveServer, refund_id: str) -> None:
    """The refund was made 25 hours ago (the processor has forgotten its key) and is due."""
    now = live.ctx.now()
    with live.ctx.db.write() as conn:
        conn.execute(
            update(t.refunds)
            .where(t.refunds.c.id == refund_id)
            .values(created_at=now - timedelta(hours=25), next_check_at=now)
        )


def test_a_refund_unanswered_past_the_processors_key_is_looked_for_before_it_is_asked(
    server: LiveServer, stripe_double: Any
) -> None:
    it, receipt_id, intent = _paid(server, stripe_double, "2.00")
    stripe_double.fault(_CARD_REFUNDS, 500, times=6)  # two rounds of the worker fail
    first = _refund(it, receipt_id, "0.50").json()["id"]
    second = _refund(it, receipt_id, "0.30").json()["id"]
    until(lambda: len(_refund_posts(stripe_double)) == 6, "the worker never asked")
    until(lambda: all(_retry_recorded(server, r) for r in (first, second)), "no retries")
    # The first was made at the processor, its answer and its event lost, longer ago
    # than the processor keeps our key: a new ask under the key would refund twice.
    stripe_double.pend_refunds(1)  # pending, and no event sent
    made = stripe_double.client("sk_test_cards").v1.refunds.create(
        params={"payment_intent": intent, "amount": 50, "metadata": {"svc_refund_id": first}}
    )
    _made_long_ago(server, first)
    assert _concluded(it, first)["status"] == "succeeded"  # as the processor lists it
    assert _row(server, first).processor_refund_id == made.id
    assert len(_refund_posts(stripe_double)) == 7  # 6 failed, and this test's: not asked
    # The second never reached the processor: looked for, not found, asked.
    _made_long_ago(server, second)
    assert _concluded(it, second)["status"] == "succeeded"
    assert len(_refund_posts(stripe_double)) == 8
    at_processor = stripe_double.client("sk_test_cards").v1.payment_intents.retrieve(
        intent, params={"expand": ["latest_charge"]}
    )
    assert at_processor.latest_charge.amount_refunded == 80  # cents: each refund once
    assert it.balance() == Decimal("1.188")

"""Card refunds in ``test`` (the sandbox processor refunds at once): a card payment on the
buy page is refunded in part, then the rest; the seller's balance and the platform fee's
share go back to the processor's clearing account, never past the payment or below the
seller's balance; ``GET /payments/{id}`` says refunded; the ledger audit stays sound
(every server test ends with it)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy import select

from reference_server.domain import ledger
from reference_server.store import tables as t

from ..support import LiveServer, at_once
from .helpers import Item, item, pay, receipt_of


def _refund(it: Item, receipt_id: str, amount: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"receipt_id": receipt_id}
    if amount is not None:
        body["amount"] = amount
    headers = {**it.seller, "Idempotency-Key": str(uuid.uuid4())}
    return httpx.post(it.live.url + "/refunds", json=body, headers=headers)


def _clearing(live: LiveServer) -> int:
    with live.ctx.db.read() as conn:
        return ledger.balance_micros(
            conn, environment="test", kind=ledger.PROCESSOR_CLEARING, ref_id=ledger.PLATFORM
        )


def _paid(it: Item) -> str:
    r = pay(it)
    assert r.status_code == 200, r.text
    return receipt_of(r.text)


def test_a_sandbox_card_payment_is_refunded_in_part_then_in_full(server: LiveServer) -> None:
    it = item(server, amount="2.00")
    receipt_id = _paid(it)
    assert it.balance() == Decimal("1.98")  # 1 % platform fee
    clearing = _clearing(server)

    part = _refund(it, receipt_id, "0.50")
    assert part.status_code == 201, part.text
    assert (part.json()["status"], part.json()["amount"]) == ("succeeded", "0.50")
    # the fee's share (0.005) comes back from the platform, the rest from the seller
    assert it.balance() == Decimal("1.485")
    assert _clearing(server) == clearing + 500_000
    state = httpx.get(f"{server.url}/payments/{receipt_id}", headers=it.seller).json()
    assert (state["state"], state["refunded"], state["remaining"]) == ("refunded", "0.50", "1.50")

    rest = _refund(it, receipt_id)
    assert rest.status_code == 201, rest.text
    assert rest.json()["amount"] == "1.50"
    assert it.balance() == Decimal("0")  # all of the seller's share, and the whole fee
    assert _clearing(server) == clearing + 2_000_000

    again = _refund(it, receipt_id, "0.01")
    assert again.status_code == 409 and again.json()["error"]["code"] == "refund_exceeds_payment"
    assert it.verify(receipt_id)["valid"] is False  # refunded in full: unlocks nothing

    tr = t.ledger_transfers
    with server.ctx.db.read() as conn:
        kinds = conn.execute(
            select(tr.c.kind, tr.c.status, tr.c.amount_micros)
            .where(tr.c.receipt_id == receipt_id, tr.c.kind.in_(("refund", "refund_fee")))
            .order_by(tr.c.amount_micros)
        ).all()
        events = conn.execute(
            select(t.events.c.data).where(t.events.c.type == "payment.refunded")
        ).all()
    assert sorted(k.amount_micros for k in kinds) == [5_000, 15_000, 495_000, 1_485_000]
    assert {k.status for k in kinds} == {"posted"}
    refunded = [e.data for e in events if e.data["receipt_id"] == receipt_id]
    assert [(e["amount"], e["rail"], e["remaining"]) for e in refunded] == [
        ("0.50", "card", "1.50"),
        ("1.50", "card", "0.00"),
    ]


def test_a_card_refund_never_takes_the_seller_below_zero(server: LiveServer) -> None:
    it = item(server, amount="2.00")
    receipt_id = _paid(it)
    # the seller spends its balance elsewhere: a withdrawal-like move out of the ledger
    with server.ctx.db.write() as conn:
        acct = ledger.account_id(
            conn, environment="test", kind=ledger.SELLER_BALANCE, ref_id=it.acct.seller_id
        )
        assert acct is not None
        clearing = ledger.ensure_account(
            conn,
            environment="test",
            kind=ledger.PROCESSOR_CLEARING,
            ref_id=ledger.PLATFORM,
            now=server.ctx.now(),
        )
        ledger.transfer(
            conn,
            environment="test",
            debit=acct,
            credit=clearing,
            amount=1_900_000,
            kind="adjustment",
            now=server.ctx.now(),
        )
    r = _refund(it, receipt_id)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "insufficient_balance"
    assert it.balance() == Decimal("0.08")
    state = httpx.get(f"{server.url}/payments/{receipt_id}", headers=it.seller).json()
    assert state["state"] == "settled" and state["refunded"] == "0.00"


def test_concurrent_partial_card_refunds_never_pass_the_payment(server: LiveServer) -> None:
    it = item(server, amount="2.00")
    receipt_id = _paid(it)
    _paid(it)  # the seller's balance covers every refund
    answers = at_once(12, lambda: _refund(it, receipt_id, "0.30"))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] * 6 + [409] * 6, [r.text for r in answers if r.status_code >= 500]
    refused = {r.json()["error"]["code"] for r in answers if r.status_code == 409}
    assert refused == {"refund_exceeds_payment"}
    state = httpx.get(f"{server.url}/payments/{receipt_id}", headers=it.seller).json()
    assert (state["refunded"], state["remaining"]) == ("1.80", "0.20")


def test_another_seller_cannot_refund_a_card_payment(server: LiveServer) -> None:
    it = item(server, amount="2.00")
    receipt_id = _paid(it)
    stranger = item(server, amount="1.00")
    r = _refund(stranger, receipt_id)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert it.balance() == Decimal("1.98")

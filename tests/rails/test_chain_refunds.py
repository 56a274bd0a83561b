"""Refunds of open-rail payments settled ``processor_deposit``, on the sandbox chain: the
hot wallet sends the USDC back to the payer's address (the refund ``pending`` until the
worker sent it, then ``succeeded`` with its ``tx_hash``), the payer's balance rises by
exactly the amount, the seller and the fee shard give back their shares, the ledger audit
stays sound (every server test ends with it) and ``svc-server reconcile`` finds no drift;
20 concurrent partial refunds never send more than the payment, on SQLite and
PostgreSQL alike."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from reference_server.domain.paid_fetch.hot_wallet import hot_wallet

from ..money.helpers import events_of
from ..payouts.helpers import complete_onboarding
from ..reconcile.helpers import reconcile
from ..sandbox.helpers import balance, transaction
from ..support import LiveServer, at_once, until
from .helpers import PRICE, RailShop, funded_payer, open_rail_shop, pay_with, receipts_of

pytestmark = pytest.mark.anyio


def refund(
    shop: RailShop, receipt_id: str, amount: str | None = None, *, key: str | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"receipt_id": receipt_id}
    if amount is not None:
        body["amount"] = amount
    return httpx.post(
        f"{shop.live.url}/refunds",
        json=body,
        headers={
            "Authorization": f"Bearer {shop.seller_key}",
            "Idempotency-Key": key or str(uuid.uuid4()),
        },
        timeout=30,
    )


def sent(shop: RailShop, refund_id: str) -> Any:
    """The refund once the worker concluded it."""
    return until(
        lambda: (r := shop.seller.refunds.get(refund_id)).status != "pending" and r,
        f"refund {refund_id} still pending",
    )


def code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


async def paid_receipt(server: LiveServer, shop: RailShop, protocol: str) -> tuple[str, str]:
    """One payment of ``PRICE`` settled ``processor_deposit``: its receipt and payer."""
    payer = funded_payer(server)
    paid = await pay_with(protocol, shop.resource.gate_url, payer)
    assert paid.status_code == 200, paid.text
    [receipt] = receipts_of(server, shop.resource.id)
    assert receipt.settlement == "processor_deposit" and receipt.payer == payer.address
    return receipt.id, payer.address


async def test_full_and_partial_refunds_go_back_on_chain(server: LiveServer, protocol: str) -> None:
    shop = open_rail_shop(server)
    receipt_id, payer = await paid_receipt(server, shop, protocol)
    earned = shop.balance().balance
    assert Decimal(0) < earned < Decimal("0.25")  # the platform took its fee
    before = balance(server.url, payer)

    first = refund(shop, receipt_id, "0.10")
    assert first.status_code == 201, first.text
    assert (first.json()["status"], first.json()["amount"]) == ("pending", "0.10")
    done = sent(shop, first.json()["id"])
    assert done.status == "succeeded" and done.tx_hash
    assert balance(server.url, payer) == before + 100_000
    tx = transaction(server.url, done.tx_hash)
    hot = hot_wallet(server.ctx, "test").address
    assert (tx["from"].lower(), tx["to"].lower(), int(tx["value"])) == (
        hot.lower(),
        payer.lower(),
        100_000,
    )
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded, state.remaining) == (
        "refunded",
        Decimal("0.10"),
        Decimal("0.15"),
    )

    over = refund(shop, receipt_id, "0.16")
    assert over.status_code == 409 and code(over) == "refund_exceeds_payment"
    assert over.json()["error"]["details"]["remaining"] == "0.15"
    rest = refund(shop, receipt_id)  # no amount: all that is left
    assert rest.status_code == 201 and rest.json()["amount"] == "0.15"
    assert sent(shop, rest.json()["id"]).status == "succeeded"
    assert balance(server.url, payer) == before + PRICE
    assert shop.balance().balance == 0  # the seller gave back its share, the fee shard the rest
    again = refund(shop, receipt_id)
    assert again.status_code == 409 and code(again) == "refund_exceeds_payment"
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded, state.remaining) == (
        "refunded",
        Decimal("0.25"),
        Decimal("0.00"),
    )
    events = events_of(server, shop.owner_id, "payment.refunded")
    assert [(e["amount"], e["remaining"], e["rail"]) for e in events] == [
        ("0.10", "0.15", protocol),
        ("0.15", "0.00", protocol),
    ]
    clean = reconcile(server, "test")
    assert clean.exit_code == 0 and clean.drift == [], clean.output
    assert clean.total("hot_wallet") == (PRICE, PRICE)


async def test_twenty_concurrent_partial_refunds_send_the_payment_once(
    server: LiveServer,
) -> None:
    shop = open_rail_shop(server)
    receipt_id, payer = await paid_receipt(server, shop, "x402")
    before = balance(server.url, payer)
    answers = at_once(20, lambda: refund(shop, receipt_id, "0.025"))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] * 10 + [409] * 10, [r.text for r in answers if r.status_code >= 500]
    assert {code(r) for r in answers if r.status_code == 409} == {"refund_exceeds_payment"}
    refunds = [sent(shop, r.json()["id"]) for r in answers if r.status_code == 201]
    assert {r.status for r in refunds} == {"succeeded"}
    assert len({r.tx_hash for r in refunds}) == 10
    assert balance(server.url, payer) == before + PRICE  # the chain moved the payment, once
    assert sum(int(transaction(server.url, r.tx_hash)["value"]) for r in refunds) == PRICE
    assert shop.seller.payments.get(receipt_id).remaining == 0
    assert shop.balance().balance == 0
    assert len(events_of(server, shop.owner_id, "payment.refunded")) == 10
    clean = reconcile(server, "test")
    assert clean.exit_code == 0 and clean.drift == [], clean.output


async def test_one_idempotency_key_sends_one_refund(server: LiveServer) -> None:
    """A retried request (same ``Idempotency-Key``) answers the same refund, sent once."""
    shop = open_rail_shop(server)
    receipt_id, payer = await paid_receipt(server, shop, "x402")
    before = balance(server.url, payer)
    first, second = (refund(shop, receipt_id, "0.05", key="refund-once") for _ in range(2))
    assert first.status_code == second.status_code == 201, (first.text, second.text)
    assert first.json()["id"] == second.json()["id"]
    assert sent(shop, first.json()["id"]).status == "succeeded"
    assert balance(server.url, payer) == before + 50_000
    assert shop.seller.payments.get(receipt_id).remaining == Decimal("0.20")


def _withdraw_everything(shop: RailShop) -> None:
    """The seller onboards for payouts and withdraws its whole balance (held at once)."""
    auth = {"Authorization": f"Bearer {shop.seller_key}"}
    url = shop.live.url
    body = {"country": "US", "type": "express"}
    link = httpx.post(f"{url}/sellers/me/connect/onboard", json=body, headers=auth)
    assert link.status_code == 200, link.text
    assert complete_onboarding(link.json()["onboard_url"]).status_code == 200
    assert httpx.post(f"{url}/sellers/me/connect/sync", headers=auth).json()["payouts_enabled"]
    keyed = {**auth, "Idempotency-Key": str(uuid.uuid4())}
    withdrawn = httpx.post(f"{url}/sellers/me/withdraw", json={}, headers=keyed)
    assert withdrawn.status_code == 201, withdrawn.text


async def test_a_chain_refund_never_takes_the_seller_below_zero(server: LiveServer) -> None:
    shop = open_rail_shop(server)
    receipt_id, payer = await paid_receipt(server, shop, "mpp")
    before = balance(server.url, payer)
    earned = shop.balance().balance
    _withdraw_everything(shop)
    r = refund(shop, receipt_id)
    assert r.status_code == 409 and code(r) == "insufficient_balance", r.text
    assert r.json()["error"]["details"] == {"available": "0.00", "needed": str(earned)}
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded) == ("settled", Decimal("0"))  # nothing held
    assert shop.seller.refunds.list().data == []
    assert balance(server.url, payer) == before

"""The spec's go-live order end to end, every hop real and on loopback: a seller enables
payments, and an agent's ``pay-url`` pays the seller's gates -- the hosted ``gate_url``
and a ``svc_asgi``-gated app -- on x402 and on MPP.  The money is followed through both
sides: the agent's wallet key and allowance, the service's hot wallet on the sandbox
chain, the seller's balance less the fee, and the events each side receives."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from svc import PaymentSucceededData
from svc.wire import structure

from ..payurl.helpers import make_agent
from ..rails.helpers import events_of, open_rail_shop
from ..rails.test_seller_app import seller_app
from ..sandbox.helpers import assert_chain_sound
from ..support import LiveApp, LiveServer


@pytest.mark.parametrize("rail", ["x402", "mpp"])
def test_pay_url_pays_a_hosted_gate(server: LiveServer, rail: str) -> None:
    shop = open_rail_shop(server, price="0.25")
    agent = make_agent(server, fund="1.00", allowance="1.00", period="day", allowed_rails=[rail])

    paid = agent.client.spend.pay_url(shop.resource.gate_url)

    assert (paid.rail, paid.amount) == (rail, Decimal("0.25"))
    assert paid.tx_hash is not None and paid.receipt_id is not None
    unlocked = paid.json()
    assert unlocked["paid"] is True and unlocked["resource"]["id"] == shop.resource.id
    seller_receipt = unlocked["receipt"]["receipt_id"]
    assert shop.seller.access.verify(seller_receipt, shop.resource.id).valid
    # Both receipts named on the result: the seller's is the one the seller verifies.
    assert paid.seller_receipt_id == seller_receipt
    assert paid.payer_receipt_id == paid.receipt_id != seller_receipt
    assert not shop.seller.access.verify(paid.payer_receipt_id, shop.resource.id).valid

    spend = agent.spend()
    assert spend.balance == Decimal("0.75") and spend.remaining_allowance == Decimal("0.75")
    assert shop.balance().balance == Decimal("0.2475")  # less the 1% platform fee
    [event] = events_of(server, shop.owner_id, "payment.succeeded")
    data = structure(event, PaymentSucceededData)
    assert (data.rail, data.settlement, data.receipt_id) == (
        rail,
        "processor_deposit",
        seller_receipt,
    )
    assert data.tx_hash == paid.tx_hash == data.processor_payment_intent_id
    [attempt] = agent.client.spend.attempts().data
    assert (attempt.status, attempt.receipt_id) == ("succeeded", paid.receipt_id)
    assert_chain_sound(server.ctx.db)


def test_pay_url_pays_a_svc_asgi_gated_app_settling_to_the_sellers_wallet(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    payout = "0x" + "ab" * 20
    shop = open_rail_shop(server, price="0.10", payout_wallet=payout)
    app = serve_app(seller_app(shop))
    agent = make_agent(server, fund="1.00")

    paid = agent.client.spend.pay_url(app.url + "/v1/report")

    body = paid.json()
    assert body["report"] == "the goods" and body["rail"] == paid.rail
    assert paid.seller_receipt_id is not None and paid.seller_receipt_id != paid.receipt_id
    assert shop.seller.access.verify(paid.seller_receipt_id).valid
    assert shop.balance().balance == Decimal("0")  # direct_wallet credits nothing
    [event] = events_of(server, shop.owner_id, "payment.succeeded")
    data = structure(event, PaymentSucceededData)
    assert (data.settlement, data.tx_hash, data.platform_fee, data.receipt_id) == (
        "direct_wallet",
        paid.tx_hash,
        Decimal("0"),
        paid.seller_receipt_id,
    )
    assert agent.spend().balance == Decimal("0.90")
    assert_chain_sound(server.ctx.db)

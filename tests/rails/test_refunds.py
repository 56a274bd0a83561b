"""Refunds and payment status on the open rails, on the sandbox chain: a payment settled
``direct_wallet`` is not the service's to refund (409 ``refund_not_custodial``; one settled
``processor_deposit`` is refunded on chain: test_chain_refunds.py); a credential a gate
claimed and has not settled reads ``claimed`` to its seller."""

from __future__ import annotations

import uuid

import httpx
import pytest

from ..support import LiveServer
from .helpers import (
    RailShop,
    fresh_credential,
    funded_payer,
    new_account,
    open_rail_shop,
    pay_with,
    receipts_of,
)

pytestmark = pytest.mark.anyio


def refund(shop: RailShop, receipt_id: str) -> httpx.Response:
    return httpx.post(
        f"{shop.live.url}/refunds",
        json={"receipt_id": receipt_id},
        headers={
            "Authorization": f"Bearer {shop.seller_key}",
            "Idempotency-Key": str(uuid.uuid4()),
        },
    )


def state(shop: RailShop, receipt_id: str) -> httpx.Response:
    return httpx.get(
        f"{shop.live.url}/payments/{receipt_id}",
        headers={"Authorization": f"Bearer {shop.seller_key}"},
    )


async def test_a_direct_wallet_payment_is_not_the_services_to_refund(
    server: LiveServer, protocol: str
) -> None:
    shop = open_rail_shop(server, payout_wallet=new_account().address)
    paid = await pay_with(protocol, shop.resource.gate_url, funded_payer(server))
    assert paid.status_code == 200, paid.text
    [receipt] = receipts_of(server, shop.resource.id)
    r = refund(shop, receipt.id)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "refund_not_custodial"
    s = state(shop, receipt.id).json()
    assert (s["state"], s["amount"], s["rail"]) == ("settled", "0.25", protocol)
    assert s["settlement"] == "direct_wallet"


async def test_a_claimed_credential_reads_claimed_to_its_seller_only(
    server: LiveServer, shop: RailShop
) -> None:
    credential = await fresh_credential(shop.resource.gate_url, funded_payer(server), "x402")
    held = shop.seller.gates.redeem(
        shop.resource.id, method="GET", url=shop.resource.gate_url, headers=credential
    )
    assert held.claim and held.verification is not None
    receipt_id = held.verification.receipt_id
    s = state(shop, receipt_id)
    assert s.status_code == 200, s.text
    assert (s.json()["state"], s.json()["amount"]) == ("claimed", "0.25")
    other = open_rail_shop(server)
    assert state(other, receipt_id).status_code == 404
    shop.seller.gates.settle(held.claim)
    assert state(shop, receipt_id).json()["state"] == "settled"

"""Open rails at hosted gates (``gate_url``): the official x402 and pympp clients pay,
settlement credits the seller (``processor_deposit``) or moves tokens to its wallet
(``direct_wallet``), and a credential pays once.  All on loopback, on the sandbox chain."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx
import pytest
from eth_account.signers.local import LocalAccount

import svc
from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS
from reference_server.store import tables as t

from ..sandbox.helpers import USDC, assert_chain_sound, transaction
from ..support import LiveServer
from .helpers import (
    PRICE,
    RailShop,
    balance,
    count_rows,
    decode,
    event_data,
    events_of,
    fresh_credential,
    fund,
    funded_payer,
    get,
    new_account,
    open_rail_shop,
    paid_with_credential,
    pay_with,
    receipts_of,
    signed_receipt,
)

pytestmark = pytest.mark.anyio
FEE = PRICE // 100  # the default platform fee, 100 bps


def test_unpaid_402_carries_both_challenges_and_the_envelope(shop: RailShop) -> None:
    url = shop.resource.gate_url + "?q=1"
    r = httpx.get(url)
    assert r.status_code == 402 and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["error"]["code"] == "payment_required"
    assert body["error"]["details"]["reason"] == "receipt_missing"
    assert body["error"]["details"]["gate_url"] == shop.resource.gate_url
    assert body["request_id"] == r.headers["x-request-id"]

    x402 = decode(r.headers["payment-required"])
    [accept] = x402["accepts"]
    assert (accept["scheme"], accept["network"], accept["asset"], accept["amount"]) == (
        "exact",
        "eip155:84532",
        USDC,
        str(PRICE),
    )
    assert accept["payTo"] == TEST_DEPOSIT_ADDRESS
    assert accept["extra"]["name"] == "USDC" and accept["extra"]["version"] == "2"
    assert x402["resource"]["url"] == url  # bound to the URL as the client addressed it

    www = r.headers["www-authenticate"]
    assert www.startswith("Payment ") and 'method="evm"' in www and 'intent="charge"' in www
    request = decode(www.split('request="')[1].split('"')[0])
    assert request["amount"] == str(PRICE) and request["recipient"] == TEST_DEPOSIT_ADDRESS
    assert request["methodDetails"]["chainId"] == 84532
    assert request["_mppx_scope"] == {
        "http_method": "GET",
        "resource": f"/g/{shop.resource.short_id}",
        "query": "q=1",
    }
    # Each 402 is a new challenge: never cached, never reused.
    again = httpx.get(url)
    assert again.headers["www-authenticate"] != www


def test_a_seller_without_payments_enabled_offers_no_open_rail(server: LiveServer) -> None:
    shop = open_rail_shop(server, enable=False)
    r = httpx.get(shop.resource.gate_url)
    assert r.status_code == 402 and r.json()["error"]["code"] == "payment_required"
    assert "payment-required" not in r.headers and "www-authenticate" not in r.headers


async def test_processor_deposit_credits_the_seller_less_the_fee(
    server: LiveServer, shop: RailShop, payer: LocalAccount, protocol: str
) -> None:
    paid = await pay_with(protocol, shop.resource.gate_url, payer)

    assert paid.status_code == 200, paid.text
    receipt_id = paid.headers["x-svc-receipt"]
    assert paid.json()["receipt"]["receipt_id"] == receipt_id
    proven = signed_receipt(server, paid)
    assert (proven.rail, proven.resource_id, proven.tx_hash) == (
        protocol,
        shop.resource.id,
        decode(paid.headers["payment-receipt"])["reference"],
    )
    assert paid.json()["receipt"]["rail"] == protocol
    mpp_receipt = decode(paid.headers["payment-receipt"])
    tx_hash = mpp_receipt["reference"]
    if protocol == "x402":
        response = decode(paid.headers["payment-response"])
        assert response["success"] is True and response["transaction"] == tx_hash
        assert response["network"] == "eip155:84532" and response["payer"] == payer.address
    else:
        assert "payment-response" not in paid.headers

    # Tokens went to the service's deposit address; the seller's balance has the price
    # less the platform fee.
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    tx = transaction(server.url, tx_hash)
    assert (tx["from"], tx["to"], tx["value"]) == (payer.address, TEST_DEPOSIT_ADDRESS, str(PRICE))
    assert shop.balance().balance == Decimal(PRICE - FEE) / 1_000_000

    [event] = events_of(server, shop.owner_id, "payment.succeeded")
    data = event_data(event, svc.PaymentSucceededData)
    assert (data.receipt_id, data.rail, data.settlement, data.environment) == (
        receipt_id,
        protocol,
        "processor_deposit",
        "test",
    )
    assert data.amount == Decimal("0.25") and data.platform_fee == Decimal("0.0025")
    assert data.seller_balance == Decimal("0.2475")
    assert data.tx_hash == tx_hash and data.processor_payment_intent_id == tx_hash
    assert data.payer == payer.address and data.network == "eip155:84532"
    assert data.resource_id == shop.resource.id and data.seller_id == shop.seller_id

    # The receipt is a service receipt like any other, and the transaction is its alias:
    # the paid response's Payment-Receipt / PAYMENT-RESPONSE unlock the gate again.
    verified = shop.seller.access.verify(receipt_id, shop.resource.id)
    assert verified.valid and verified.rail == protocol and verified.amount == Decimal("0.25")
    for name in ("payment-receipt", "payment-response"):
        if name in paid.headers:
            again = get(shop.resource.gate_url, headers={name: paid.headers[name]})
            assert again.status_code == 200 and again.headers["x-svc-receipt"] == receipt_id
    assert_chain_sound(server.ctx.db)


async def test_direct_wallet_pays_the_seller_wallet_and_credits_nothing(
    server: LiveServer, protocol: str
) -> None:
    wallet = new_account().address
    shop = open_rail_shop(server, payout_wallet=wallet)
    r = get(shop.resource.gate_url)
    assert decode(r.headers["payment-required"])["accepts"][0]["payTo"] == wallet
    payer = funded_payer(server)
    paid = await pay_with(protocol, shop.resource.gate_url, payer)

    assert paid.status_code == 200, paid.text
    assert balance(server.url, wallet) == PRICE
    assert shop.balance().balance == Decimal("0")
    [receipt] = receipts_of(server, shop.resource.id)
    assert (receipt.settlement, receipt.transfer_id, receipt.fee_micros) == (
        "direct_wallet",
        None,
        0,
    )
    assert receipt.tx_hash and receipt.payer == payer.address and receipt.network == "eip155:84532"
    [event] = events_of(server, shop.owner_id, "payment.succeeded")
    data = event_data(event, svc.PaymentSucceededData)
    assert (data.settlement, data.platform_fee, data.seller_balance) == (
        "direct_wallet",
        Decimal("0"),
        Decimal("0"),
    )
    assert data.tx_hash == receipt.tx_hash and data.rail == protocol
    assert_chain_sound(server.ctx.db)


async def test_a_replayed_credential_is_refused_and_pays_nothing_twice(
    server: LiveServer, shop: RailShop, payer: LocalAccount, protocol: str
) -> None:
    paid, credential = await paid_with_credential(shop.resource.gate_url, payer, protocol)
    assert paid.status_code == 200, paid.text

    replay = get(shop.resource.gate_url, headers=credential)
    assert replay.status_code == 402
    details = replay.json()["error"]["details"]
    assert details["reason"] == "receipt_refused" and details["rail"] == protocol
    assert "already been used" in details["refused_because"]
    # No new challenge after a replay: it would invite an auto-paying client to pay again.
    assert "payment-required" not in replay.headers and "www-authenticate" not in replay.headers

    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    [receipt] = receipts_of(server, shop.resource.id)
    transfers = t.ledger_transfers
    assert count_rows(server, transfers, transfers.c.receipt_id == receipt.id) == 2  # pay, fee
    [failed] = events_of(server, shop.owner_id, "payment.failed")
    assert (failed["rail"], failed["reason"], failed["resource_id"], failed["amount"]) == (
        protocol,
        "receipt_refused",
        shop.resource.id,
        "0.25",
    )
    assert failed["payer"] == payer.address
    assert event_data(failed, svc.PaymentFailedData).payer == payer.address
    assert_chain_sound(server.ctx.db)


async def test_an_unfunded_payer_is_refused_with_payment_failed(
    server: LiveServer, shop: RailShop, protocol: str
) -> None:
    payer = new_account()  # never funded
    refused = await pay_with(protocol, shop.resource.gate_url, payer)
    assert refused.status_code == 402
    details = refused.json()["error"]["details"]
    assert details["reason"] == "receipt_refused"
    assert "exceeds balance" in details["refused_because"]
    assert receipts_of(server, shop.resource.id) == []
    assert shop.balance().balance == Decimal("0")
    failed = events_of(server, shop.owner_id, "payment.failed")
    assert failed and all(f["rail"] == protocol for f in failed)
    assert failed[0]["payer"] == payer.address

    # A refused authorization spent nothing and its claim was released: once the payer
    # is funded, the very same credential pays.
    credential = await fresh_credential(shop.resource.gate_url, payer, protocol)
    assert get(shop.resource.gate_url, credential).status_code == 402
    fund(server.url, payer.address, "1")
    paid = get(shop.resource.gate_url, credential)
    assert paid.status_code == 200, paid.text
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(receipts_of(server, shop.resource.id)) == 1


def test_a_plain_unpaid_request_emits_no_payment_failed(server: LiveServer, shop: RailShop) -> None:
    for _ in range(3):
        assert httpx.get(shop.resource.gate_url).status_code == 402
    assert events_of(server, shop.owner_id, "payment.failed") == []


async def test_concurrent_redeems_of_one_credential_pay_once(
    server: LiveServer, shop: RailShop, payer: LocalAccount, protocol: str
) -> None:
    credential = await fresh_credential(shop.resource.gate_url, payer, protocol)

    async with httpx.AsyncClient(timeout=30) as http:
        answers = await asyncio.gather(
            *(http.get(shop.resource.gate_url, headers=credential) for _ in range(10))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [402] * 9, [a.text for a in answers if a.status_code != 402]
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert shop.balance().balance == Decimal(PRICE - FEE) / 1_000_000
    transfers = t.ledger_transfers
    [receipt] = receipts_of(server, shop.resource.id)
    assert (
        count_rows(
            server, transfers, transfers.c.receipt_id == receipt.id, transfers.c.kind == "payment"
        )
        == 1
    )
    assert len(events_of(server, shop.owner_id, "payment.succeeded")) == 1
    assert len(events_of(server, shop.owner_id, "payment.failed")) == 9
    assert_chain_sound(server.ctx.db)


async def test_a_credential_for_another_gate_is_refused(server: LiveServer, shop: RailShop) -> None:
    other = shop.seller.resources.create(kind="http", path="/other", amount="0.25")
    payer = funded_payer(server)
    credential = await fresh_credential(shop.resource.gate_url, payer, "mpp")
    refused = get(other.gate_url, headers=credential)
    assert refused.status_code == 402
    assert refused.json()["error"]["details"]["reason"] == "receipt_refused"
    assert balance(server.url, payer.address) == 1_000_000
    # The credential is still good where it was issued.
    assert get(shop.resource.gate_url, headers=credential).status_code == 200

"""Open rails at a seller's own app behind ``svc_asgi.PaymentGate``: the gate holds no key
and imports neither x402 nor MPP, yet after enable-payments its 402 carries both
challenges and the official clients pay it, the service settling through
``POST /gates/challenge`` and ``POST /gates/redeem``."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import svc
from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS
from svc_asgi import PaymentGate, payment_of

from ..gate.support import CountingTransport
from ..sandbox.helpers import assert_chain_sound
from ..support import LiveApp, LiveServer
from .helpers import (
    PRICE,
    RailShop,
    balance,
    decode,
    event_data,
    events_of,
    fresh_credential,
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


async def _report(request: Request) -> JSONResponse:
    payment = payment_of(request)
    assert payment is not None
    return JSONResponse(
        {
            "report": "the goods",
            "receipt_id": payment.receipt_id,
            "rail": payment.rail,
            "source": payment.source,
            "amount": str(payment.amount),
        }
    )


def seller_app(shop: RailShop, **kwargs: Any) -> PaymentGate:
    """The seller's app exactly as docs/gate.md shows it: nothing about open rails."""
    kwargs.setdefault("service_url", shop.live.url)
    kwargs.setdefault("seller_key", shop.seller_key)
    return PaymentGate(
        Starlette(routes=[Route("/v1/report", _report, methods=["GET", "POST"])]),
        prices={"/v1/report": shop.resource.id},
        **kwargs,
    )


def test_the_apps_402_carries_both_challenges_bound_to_the_apps_url(
    shop: RailShop, serve_app: Callable[..., LiveApp]
) -> None:
    app = serve_app(seller_app(shop))
    url = app.url + "/v1/report?page=2"
    r = httpx.get(url)
    assert r.status_code == 402 and r.json()["error"]["code"] == "payment_required"
    x402 = decode(r.headers["payment-required"])
    assert x402["resource"]["url"] == url
    [accept] = x402["accepts"]
    assert (accept["network"], accept["amount"], accept["payTo"]) == (
        "eip155:84532",
        str(PRICE),
        TEST_DEPOSIT_ADDRESS,
    )
    www = r.headers["www-authenticate"]
    assert www.startswith("Payment ")
    scope = decode(www.split('request="')[1].split('"')[0])["_mppx_scope"]
    assert scope == {"http_method": "GET", "resource": "/v1/report", "query": "page=2"}


def test_no_rail_headers_until_payments_are_enabled_or_when_turned_off(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = open_rail_shop(server, enable=False)
    app = serve_app(seller_app(shop))
    r = httpx.get(app.url + "/v1/report")
    assert r.status_code == 402
    assert "payment-required" not in r.headers and "www-authenticate" not in r.headers

    shop.seller.sellers.enable_payments()  # no change to the app
    r = httpx.get(app.url + "/v1/report")
    assert "payment-required" in r.headers and "www-authenticate" in r.headers

    off = serve_app(seller_app(shop, rails=()))
    r = httpx.get(off.url + "/v1/report")
    assert r.status_code == 402 and "payment-required" not in r.headers


async def test_official_clients_pay_the_app_processor_deposit(
    server: LiveServer, shop: RailShop, serve_app: Callable[..., LiveApp], protocol: str
) -> None:
    app = serve_app(seller_app(shop))
    payer = funded_payer(server)
    paid = await pay_with(protocol, app.url + "/v1/report", payer)

    assert paid.status_code == 200, paid.text
    body = paid.json()
    receipt_id = paid.headers["x-svc-receipt"]
    assert body["receipt_id"] == receipt_id and body["report"] == "the goods"
    assert (body["rail"], body["source"], body["amount"]) == (protocol, protocol, "0.25")
    assert "payment-receipt" in paid.headers
    assert ("payment-response" in paid.headers) == (protocol == "x402")
    assert paid.headers["cache-control"] == "private"
    proven = signed_receipt(server, paid)
    assert (proven.rail, proven.resource_id, proven.tx_hash) == (
        protocol,
        shop.resource.id,
        decode(paid.headers["payment-receipt"])["reference"],
    )

    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert shop.balance().balance == Decimal("0.2475")
    [event] = events_of(server, shop.owner_id, "payment.succeeded")
    data = event_data(event, svc.PaymentSucceededData)
    assert (data.receipt_id, data.rail, data.settlement) == (
        receipt_id,
        protocol,
        "processor_deposit",
    )
    assert data.platform_fee == Decimal("0.0025") and data.seller_balance == Decimal("0.2475")
    # The receipt unlocks the app again without paying, like any service receipt.
    again = get(app.url + "/v1/report", headers={"X-Svc-Receipt": receipt_id})
    assert again.status_code == 200 and again.json()["source"] == "header"
    assert_chain_sound(server.ctx.db)


async def test_official_clients_pay_the_app_direct_wallet(
    server: LiveServer, serve_app: Callable[..., LiveApp], protocol: str
) -> None:
    wallet = new_account().address
    shop = open_rail_shop(server, payout_wallet=wallet)
    app = serve_app(seller_app(shop))
    payer = funded_payer(server)
    paid = await pay_with(protocol, app.url + "/v1/report", payer, method="POST")
    assert paid.status_code == 200, paid.text
    assert balance(server.url, wallet) == PRICE
    assert shop.balance().balance == Decimal("0")
    [receipt] = receipts_of(server, shop.resource.id)
    assert (receipt.settlement, receipt.transfer_id, receipt.rail) == (
        "direct_wallet",
        None,
        protocol,
    )
    assert_chain_sound(server.ctx.db)


async def test_a_replay_at_the_app_is_refused(
    server: LiveServer, shop: RailShop, serve_app: Callable[..., LiveApp], protocol: str
) -> None:
    app = serve_app(seller_app(shop))
    payer = funded_payer(server)
    paid, credential = await paid_with_credential(app.url + "/v1/report", payer, protocol)
    assert paid.status_code == 200, paid.text
    replay = get(app.url + "/v1/report", headers=credential)
    assert replay.status_code == 402
    details = replay.json()["error"]["details"]
    assert details["reason"] == "receipt_refused" and details["rail"] == protocol
    assert "payment-required" not in replay.headers
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(events_of(server, shop.owner_id, "payment.failed")) == 1


async def test_only_the_credential_leaves_the_app_and_receipts_stay_on_the_hot_path(
    server: LiveServer, shop: RailShop, serve_app: Callable[..., LiveApp]
) -> None:
    counting = CountingTransport()
    sent: list[httpx.Request] = []

    class Spy(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            return await counting.handle_async_request(request)

    client = svc.AsyncClient(base_url=server.url, seller_key=shop.seller_key, transport=Spy())
    app = serve_app(seller_app(shop, client=client))
    payer = funded_payer(server)
    credential = await fresh_credential(app.url + "/v1/report", payer, "x402")
    paid = get(
        app.url + "/v1/report",
        headers={**credential, "Authorization": "Bearer app-login", "Cookie": "s=1"},
    )
    assert paid.status_code == 200, paid.text
    [redeem] = [r for r in sent if r.url.path == "/gates/redeem"]
    forwarded = json.loads(redeem.content)["headers"]
    assert forwarded == {"payment-signature": credential["payment-signature"]}

    # A request with the receipt and no credential never asks about rails again.
    before = dict(counting.calls)
    for _ in range(5):
        ok = get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.headers["x-svc-receipt"]})
        assert ok.status_code == 200
    after = dict(counting.calls)
    assert after.get("POST /gates/challenge") == before.get("POST /gates/challenge")
    assert after.get("POST /gates/redeem") == before.get("POST /gates/redeem") == 1
    assert after["POST /access/verify"] - before.get("POST /access/verify", 0) == 1


def test_an_unreadable_credential_at_the_app_is_malformed(
    server: LiveServer, shop: RailShop, serve_app: Callable[..., LiveApp]
) -> None:
    app = serve_app(seller_app(shop))
    for credential in ("!!not-base64", "x" * 20_000):  # the second is too long to be one
        r = httpx.get(app.url + "/v1/report", headers={"PAYMENT-SIGNATURE": credential})
        assert r.status_code == 402, r.text
        assert r.json()["error"]["details"]["reason"] == "receipt_malformed"
    assert receipts_of(server, shop.resource.id) == []

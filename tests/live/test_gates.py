"""Live gates on the devchain: the official x402 client and pympp's client pay a hosted
gate and a seller's own app behind ``svc_asgi``; the service settles through the official
x402 facilitator, and every balance is read on chain."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from svc_asgi import PaymentGate

from ..devchain.running import RunningDevchain
from ..rails.helpers import RailShop, decode, open_rail_shop
from ..support import LiveApp, LiveServer
from .helpers import PAYERS, PRICE, live_server, open_holds, receipts_of

pytestmark = pytest.mark.anyio


async def _report(request: Request) -> JSONResponse:
    return JSONResponse({"report": "the goods"})


def _seller_app(shop: RailShop) -> PaymentGate:
    return PaymentGate(
        Starlette(routes=[Route("/v1/report", _report)]),
        prices={"/v1/report": shop.resource.id},
        service_url=shop.live.url,
        seller_key=shop.seller_key,
    )


@pytest.mark.parametrize(
    ("protocol", "gate", "settlement"),
    [
        ("x402", "hosted", "direct_wallet"),
        ("mpp", "hosted", "processor_deposit"),
        ("x402", "svc_asgi", "processor_deposit"),
        ("mpp", "svc_asgi", "direct_wallet"),
    ],
)
async def test_a_live_gate_settles_on_chain(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
    protocol: str,
    gate: str,
    settlement: str,
) -> None:
    live = live_server(make_server, devchain)
    wallet = devchain.new_payer(0).address if settlement == "direct_wallet" else None
    upstream = serve_app(Starlette(routes=[Route("/v1/report", _report)]))
    shop = open_rail_shop(
        live,
        environment="live",
        payout_wallet=wallet,
        upstream_url=f"{upstream.url}/v1/report" if gate == "hosted" else None,
    )
    url = (
        shop.resource.gate_url
        if gate == "hosted"
        else serve_app(_seller_app(shop)).url + "/v1/report"
    )
    pay_to = wallet or devchain.deposit_address

    payer = devchain.new_payer(1_000_000)
    deposit_before = devchain.balance(devchain.deposit_address)
    paid = await PAYERS[protocol](devchain, url, payer)

    assert paid.status_code == 200, paid.text
    assert paid.json() == {"report": "the goods"}
    assert devchain.balance(payer.address) == 1_000_000 - PRICE
    [receipt] = receipts_of(live, shop.resource.id)
    assert (receipt.environment, receipt.rail, receipt.settlement) == ("live", protocol, settlement)
    chain_tx = devchain.web3().eth.get_transaction_receipt(receipt.tx_hash)
    assert chain_tx["status"] == 1 and chain_tx["to"] == devchain.asset
    if settlement == "direct_wallet":
        assert devchain.balance(pay_to) == PRICE
        assert shop.balance().balance == Decimal("0")
    else:
        assert devchain.balance(devchain.deposit_address) == deposit_before + PRICE
        assert shop.balance().balance == Decimal("0.2475")  # less the 1% fee
    if protocol == "x402":
        assert decode(paid.headers["payment-response"])["transaction"] == receipt.tx_hash
    assert open_holds(live) == []

"""Live ``pay-url`` on the devchain: the hot wallet pays a seller behind x402's own
middleware, the official facilitator settles, and the chain confirms before the ledger
posts (``live_rpc_url``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal

from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from reference_server.domain import ledger
from reference_server.store import tables as t

from ..devchain.running import RunningDevchain
from ..payurl.helpers import attempt_row, make_agent
from ..support import LiveApp, LiveServer
from .apps import x402_seller
from .helpers import PRICE, live_server


def _payouts(live: LiveServer) -> int:
    with live.ctx.db.read() as conn:
        return ledger.balance_micros(
            conn, environment="live", kind=ledger.CHAIN_PAYOUTS, ref_id=ledger.PLATFORM
        )


def test_live_pay_url_pays_an_x402_seller_on_chain(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    live = live_server(make_server, devchain)
    pay_to = devchain.new_payer(0).address
    seller = serve_app(x402_seller(devchain, pay_to, PRICE))
    agent = make_agent(live, environment="live")
    hot = devchain.hot_wallet.address
    before = devchain.balance(hot)

    r = agent.pay_url(seller.url + "/report")

    assert r.status_code == 200, r.text
    paid = r.json()
    assert devchain.balance(hot) == before - PRICE  # exactly the price, on chain
    assert devchain.balance(pay_to) == PRICE
    moved = devchain.web3().eth.get_transaction_receipt(paid["tx_hash"])
    assert moved["status"] == 1 and moved["to"] == devchain.asset
    with live.ctx.db.read() as conn:
        receipt = conn.execute(
            select(t.receipts).where(t.receipts.c.id == paid["receipt_id"])
        ).one()
    assert (receipt.environment, receipt.kind, receipt.amount_micros, receipt.tx_hash) == (
        "live",
        "url",
        PRICE,
        paid["tx_hash"],
    )
    assert _payouts(live) == PRICE  # the ledger agrees with the chain
    assert agent.spend().balance == Decimal("9.75")


def test_a_receipt_the_chain_does_not_confirm_is_not_posted(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    """A seller that answers 200 with a ``PAYMENT-RESPONSE`` naming a real transaction
    that is not this payment (a mint), and never settles: nothing moves, nothing posts."""
    minted = devchain.web3().eth.get_block("latest", full_transactions=True)
    sham_tx = "0x" + bytes(minted["transactions"][-1]["hash"]).hex()
    sham = base64.b64encode(
        json.dumps({"success": True, "transaction": sham_tx, "network": devchain.network}).encode()
    ).decode()
    pay_to = devchain.new_payer(0).address
    offer = x402_seller(devchain, pay_to, PRICE)

    async def lying(request: Request) -> Response:
        return JSONResponse({"report": "the goods"}, headers={"PAYMENT-RESPONSE": sham})

    liar = Starlette(routes=[Route("/report", lying)])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        """The 402 is x402's middleware's; the paid retry gets the lie, unsettled."""
        paying = any(name == b"payment-signature" for name, _ in scope.get("headers") or [])
        await (liar if paying else offer)(scope, receive, send)

    seller = serve_app(app)
    live = live_server(make_server, devchain)
    agent = make_agent(live, environment="live")
    hot = devchain.hot_wallet.address
    before = devchain.balance(hot)

    r = agent.pay_url(seller.url + "/report")

    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "payment_unconfirmed"
    assert attempt_row(live, error["details"]["attempt_id"]).status == "pending"
    assert devchain.balance(hot) == before and devchain.balance(pay_to) == 0
    assert _payouts(live) == 0

"""Live ``pay-url`` on the devchain: the hot wallet pays a seller behind x402's own
middleware, the official facilitator settles, and the chain confirms before the ledger
posts (``live_rpc_url``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference_server.domain import ledger
from reference_server.domain.paid_fetch.pending import resolve_pending
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


def _strip_receipt(app: ASGIApp) -> ASGIApp:
    """The seller's proxy drops the settlement receipt from the paid answer."""

    async def stripped(scope: Scope, receive: Receive, send: Send) -> None:
        async def without(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (k, v) for k, v in message["headers"] if k.lower() != b"payment-response"
                ]
            await send(message)

        await app(scope, receive, without)

    return stripped


def _status(live: LiveServer, attempt_id: str) -> tuple[str, str | None, str]:
    row = attempt_row(live, attempt_id)
    with live.ctx.db.read() as conn:
        transfer = conn.execute(
            select(t.ledger_transfers.c.status).where(t.ledger_transfers.c.id == row.transfer_id)
        ).scalar_one()
    return row.status, row.tx_hash, transfer


def test_a_pending_payment_the_chain_shows_settled_is_posted(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    live = live_server(make_server, devchain)
    pay_to = devchain.new_payer(0).address
    seller = serve_app(_strip_receipt(x402_seller(devchain, pay_to, PRICE)))
    agent = make_agent(live, environment="live")
    hot = devchain.hot_wallet.address
    before = devchain.balance(hot)

    r = agent.pay_url(seller.url + "/report")

    assert r.status_code == 502, r.text
    attempt_id = r.json()["error"]["details"]["attempt_id"]
    assert _status(live, attempt_id) == ("pending", None, "pending")
    assert devchain.balance(hot) == before - PRICE  # it did move, unconfirmed
    assert _payouts(live) == 0

    assert resolve_pending(live.ctx) == 1
    assert resolve_pending(live.ctx) == 0

    status, tx_hash, transfer = _status(live, attempt_id)
    assert (status, transfer) == ("succeeded", "posted")
    assert tx_hash is not None
    assert devchain.web3().eth.get_transaction_receipt(tx_hash)["status"] == 1
    assert _payouts(live) == PRICE
    assert agent.spend().balance == Decimal("9.75")


def test_a_pending_payment_never_settled_is_released_once_it_lapses(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    async def broken(request: Request) -> Response:
        return JSONResponse({"error": "gone"}, status_code=500)

    live = live_server(make_server, devchain)
    pay_to = devchain.new_payer(0).address
    seller = serve_app(x402_seller(devchain, pay_to, PRICE, broken))  # x402 settles no 500
    agent = make_agent(live, environment="live")
    hot = devchain.hot_wallet.address
    before = devchain.balance(hot)

    r = agent.pay_url(seller.url + "/report")

    assert r.status_code == 502, r.text
    attempt_id = r.json()["error"]["details"]["attempt_id"]
    assert resolve_pending(live.ctx) == 0  # unused but still valid: it could yet settle
    assert _status(live, attempt_id) == ("pending", None, "pending")

    assert resolve_pending(live.ctx, now=live.ctx.now() + timedelta(hours=2)) == 1

    assert _status(live, attempt_id) == ("failed", None, "voided")
    assert devchain.balance(hot) == before and devchain.balance(pay_to) == 0
    assert _payouts(live) == 0
    state = agent.spend()
    assert state.balance == Decimal("10") and state.spent_total == Decimal("0")

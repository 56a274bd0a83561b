"""Live pay-url, where no chain of ours can be asked: the URL's settlement receipt is the
only confirmation, and without one the money stays reserved (``pending``).

The live "chain" here is the sandbox token's identity configured as the live asset, and the
sellers settle through the sandbox facilitator, so the live path runs end to end on
loopback; nothing in it reads the sandbox chain.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference_server.domain import ledger
from reference_server.store import tables as t

from ..sandbox.helpers import USDC, fund, new_account, serve, transaction
from ..support import LiveServer
from .apps import PRICE, claiming, gated_app, metered_app
from .helpers import attempt_row, make_agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
HOT_WALLET = new_account()


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    """A server whose live environment pays the sandbox token with HOT_WALLET."""
    live = make_server(
        live_hot_wallet_key="0x" + bytes(HOT_WALLET.key).hex(),
        live_chain_id=84532,
        live_asset_address=USDC,
        live_asset_name="USDC",
        live_asset_version="2",
    )
    fund(live.url, HOT_WALLET.address, "10")
    return live


def test_live_posts_what_the_url_confirms(server: LiveServer, x402_url: str, pay_to: str) -> None:
    agent = make_agent(server, environment="live")
    r = agent.pay_url(x402_url)
    assert r.status_code == 200, r.text
    paid = r.json()
    tx = transaction(server.url, paid["tx_hash"])
    assert (tx["from"], tx["to"], tx["value"]) == (HOT_WALLET.address, pay_to, str(PRICE))
    assert agent.spend().balance == Decimal("9.75")
    with server.ctx.db.read() as conn:
        receipt = conn.execute(
            select(t.receipts).where(t.receipts.c.id == paid["receipt_id"])
        ).one()
        payouts = ledger.balance_micros(
            conn, environment="live", kind=ledger.CHAIN_PAYOUTS, ref_id=ledger.PLATFORM
        )
    assert (receipt.environment, receipt.kind, receipt.settlement) == ("live", "url", "external")
    assert payouts == PRICE


def test_live_keeps_an_unconfirmed_payment_reserved(
    server: LiveServer, facilitator: str, pay_to: str
) -> None:
    async def broken(request: Request) -> Response:
        return JSONResponse({"error": "gone"}, status_code=500)

    agent = make_agent(server, environment="live")
    with serve(gated_app(facilitator, pay_to, broken)) as url:
        r = agent.pay_url(url + "/paid")
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "payment_unconfirmed"
    assert error["details"]["status"] == "pending" and error["details"]["upstream_status"] == 500
    row = attempt_row(server, error["details"]["attempt_id"])
    assert row.status == "pending"
    with server.ctx.db.read() as conn:
        status = conn.execute(
            select(t.ledger_transfers.c.status).where(t.ledger_transfers.c.id == row.transfer_id)
        ).scalar_one()
    assert status == "pending"
    state = agent.spend()
    assert state.balance == Decimal("9.75") and state.spent_total == Decimal("0.25")


def test_live_without_a_hot_wallet_is_refused(
    make_server: Callable[..., LiveServer], server: LiveServer, x402_url: str
) -> None:
    plain = make_server()
    agent = make_agent(plain, environment="live")
    r = agent.pay_url(x402_url)
    assert (r.status_code, r.json()["error"]["code"]) == (503, "rails_not_configured")
    assert agent.client.spend.attempts().data == []  # refused before the attempt began


@pytest.mark.parametrize("claimed", [None, 900_000], ids=["as settled", "claims above the max"])
def test_live_metered_spends_what_the_url_settled_never_above_the_max(
    server: LiveServer, facilitator: str, pay_to: str, claimed: int | None
) -> None:
    """x402 ``upto`` in live: the URL's ``PAYMENT-RESPONSE`` amount is the word on what
    moved, but a claim above the signed maximum counts as the maximum."""
    agent = make_agent(server, environment="live")
    app = metered_app(facilitator, pay_to, 137_000)
    with serve(app if claimed is None else claiming(app, claimed)) as url:
        r = agent.pay_url(url + "/report")
    assert r.status_code == 200, r.text
    paid = r.json()
    spent = Decimal("0.137") if claimed is None else Decimal("0.50")
    assert (Decimal(paid["amount"]), Decimal(paid["max_amount"])) == (spent, Decimal("0.50"))
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("10.00") - spent, spent)
    assert transaction(server.url, paid["tx_hash"])["value"] == "137000"

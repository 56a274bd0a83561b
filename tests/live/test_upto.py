"""A live metered gate on the devchain: x402's own client signs an ``upto`` maximum, the
service verifies it and settles what the units cost through the official x402 facilitator
(Permit2 and x402's upto proxy on chain); every balance is read on chain."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

import httpx
import pytest
from eth_account import Account
from x402 import x402Client
from x402.http.clients.httpx import x402AsyncTransport
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.mechanisms.evm.upto import UptoEvmClientScheme

import svc
from svc_asgi import PaymentGate

from ..devchain.running import RunningDevchain
from ..rails.helpers import Capture, decode
from ..rails.streaming import TokenApp, read_events, upto_credential
from ..support import LiveApp, LiveServer
from ..support import new_account as new_service_account
from .helpers import live_server, open_holds, receipts_of

pytestmark = pytest.mark.anyio
MAX = 500_000  # $0.50
UNITS = 137
ACTUAL = UNITS * 100  # $0.0001 a token


def upto_client(devchain: RunningDevchain) -> tuple[x402Client, str]:
    """x402's client signing ``upto`` for a standard devchain payer (it has approved
    Permit2; ``new_payer()`` has not), and the payer's address."""
    payer = Account.from_key(devchain.exports["DEVCHAIN_PAYER_1_KEY"])
    client = x402Client().register(devchain.network, UptoEvmClientScheme(EthAccountSigner(payer)))
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    return client, payer.address


def metered_seller(live: LiveServer, path: str) -> tuple[str, svc.Resource]:
    """A live seller with payments on, selling ``path`` at 0.0001 a token up to 0.50."""
    account = new_service_account(live.url, "live")
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    seller.sellers.enable_payments()
    resource = seller.resources.create(
        kind="http",
        path=path,
        pricing="metered",
        unit_price="0.0001",
        unit="token",
        max_amount=Decimal("0.50"),
    )
    return account.seller_key, resource


async def test_a_live_upto_payment_settles_what_the_units_cost(
    make_server: Callable[..., LiveServer], devchain: RunningDevchain
) -> None:
    live = live_server(make_server, devchain)
    account = new_service_account(live.url, "live")
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    seller.sellers.enable_payments()
    resource = seller.resources.create(
        kind="http",
        path="/v1/chat",
        pricing="metered",
        unit_price="0.0001",
        unit="token",
        max_amount=Decimal("0.50"),
    )
    # A standard devchain payer: it has approved Permit2 (new_payer() has not).
    payer = Account.from_key(devchain.exports["DEVCHAIN_PAYER_1_KEY"])
    client = x402Client().register(devchain.network, UptoEvmClientScheme(EthAccountSigner(payer)))
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    wire = Capture()
    async with httpx.AsyncClient(transport=x402AsyncTransport(client, transport=wire)) as http:
        await http.get(resource.gate_url)
    assert wire.credential is not None, "x402's client did not pay the upto challenge"
    payer_before = devchain.balance(payer.address)
    deposit_before = devchain.balance(devchain.deposit_address)

    held = seller.gates.redeem(
        resource.id, method="GET", url=resource.gate_url, headers=wire.credential
    )
    assert held.claim, held
    paid = seller.gates.settle(held.claim, units=UNITS)

    assert paid.paid, paid
    assert devchain.balance(payer.address) == payer_before - ACTUAL
    assert devchain.balance(devchain.deposit_address) == deposit_before + ACTUAL
    [receipt] = receipts_of(live, resource.id)
    assert (receipt.amount_micros, receipt.units, receipt.max_amount_micros) == (ACTUAL, 137, MAX)
    assert decode(dict(paid.headers)["PAYMENT-RESPONSE"])["transaction"] == receipt.tx_hash
    chain_tx = devchain.web3().eth.get_transaction_receipt(receipt.tx_hash)
    assert chain_tx["status"] == 1
    assert open_holds(live) == []


async def test_two_hundred_tokens_stream_through_a_live_gate_and_settle_on_chain(
    make_server: Callable[..., LiveServer],
    devchain: RunningDevchain,
    serve_app: Callable[..., LiveApp],
) -> None:
    """Issue 27's first Done-when on the real chain: a Starlette app behind
    ``PaymentGate`` streams 200 tokens over about two seconds; the official facilitator
    settles exactly 200 x 0.0001 after the last, named by the final ``svc-receipt``."""
    live = live_server(make_server, devchain)
    seller_key, resource = metered_seller(live, "/v1/stream")
    client, payer = upto_client(devchain)
    tokens = TokenApp()
    gate = PaymentGate(
        tokens.app(),
        service_url=live.url,
        seller_key=seller_key,
        prices={"GET /v1/stream": resource.id},
    )
    url = serve_app(gate).url + "/v1/stream"
    headers = await upto_credential(url, client)
    payer_before = devchain.balance(payer)

    events, response = await read_events(url, headers)

    assert response.status_code == 200
    assert [text for _, text in events[:-1]] == [f"data: tok{i}" for i in range(200)]
    assert tokens.last_made is not None and events[0][0] < tokens.last_made
    name, data = events[-1][1].split("\n", 1)
    assert name == "event: svc-receipt"
    receipt = json.loads(data.removeprefix("data: "))
    assert (receipt["units"], Decimal(receipt["amount"])) == (200, Decimal("0.02"))
    [row] = receipts_of(live, resource.id)
    assert row.id == receipt["receipt_id"] and row.amount_micros == 20_000
    assert devchain.balance(payer) == payer_before - 20_000
    assert devchain.web3().eth.get_transaction_receipt(row.tx_hash)["status"] == 1
    assert open_holds(live) == []

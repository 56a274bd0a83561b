"""A live metered gate on the devchain: x402's own client signs an ``upto`` maximum, the
service verifies it and settles what the units cost through the official x402 facilitator
(Permit2 and x402's upto proxy on chain); every balance is read on chain."""

from __future__ import annotations

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

from ..devchain.running import RunningDevchain
from ..rails.helpers import Capture, decode
from ..support import LiveServer
from ..support import new_account as new_service_account
from .helpers import live_server, open_holds, receipts_of

pytestmark = pytest.mark.anyio
MAX = 500_000  # $0.50
UNITS = 137
ACTUAL = UNITS * 100  # $0.0001 a token


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

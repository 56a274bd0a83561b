"""``live`` reconciles against a real chain (anvil, the committed token, the official x402
facilitator): clean after real payments -- x402's client paying a live gate settled to the
deposit address and one settled to a seller's own wallet, and pay-url paying from the hot
wallet -- then drift made on the chain on purpose is found and named: tokens sent straight
to the deposit address, and a payment settled there through the facilitator without the
server.

The devchain is shared by the whole run, so this server has a deposit address and a hot
wallet of its own, and reads the chain from the block the test began at."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.signers import EthAccountSigner

from ..devchain.running import RunningDevchain
from ..devchain.test_devchain import PRICE as X402_PRICE
from ..devchain.test_devchain import _gated_app
from ..payurl.helpers import make_agent
from ..rails.helpers import open_rail_shop
from ..sandbox.helpers import serve
from ..support import LiveServer
from .helpers import history, reconcile

pytestmark = pytest.mark.anyio
PRICE = 250_000  # the shops' "0.25"


async def _pay(devchain: RunningDevchain, url: str) -> None:
    """x402's own client, from a fresh payer, allowed the devchain's token."""
    client = x402Client()
    register_exact_evm_client(client, EthAccountSigner(devchain.new_payer()))
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    async with x402HttpxClient(client) as http:
        paid = await http.get(url)
    assert paid.status_code == 200, paid.text


async def test_live_books_reconcile_with_the_chain_and_drift_is_found(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    start = int(devchain.web3().eth.block_number) + 1
    deposit = Account.create().address
    hot = devchain.new_payer(2_000_000)  # the operator's float: a refill, not drift
    settings: dict[str, Any] = {
        **devchain.live_settings(),
        "live_deposit_address": deposit,
        "live_hot_wallet_key": "0x" + bytes(hot.key).hex(),
        "live_reconcile_from_block": start,
    }
    server = make_server(**settings)
    shop = open_rail_shop(server, environment="live")
    seller_wallet = Account.create().address
    direct = open_rail_shop(
        server, environment="live", payout_wallet=seller_wallet, path="/v1/direct"
    )
    await _pay(devchain, shop.resource.gate_url)
    await _pay(devchain, direct.resource.gate_url)
    agent = make_agent(server, fund="1.00", environment="live")
    paid = agent.pay_url(shop.resource.gate_url)
    assert paid.status_code == 200, paid.text
    assert devchain.balance(deposit) == 2 * PRICE
    assert devchain.balance(seller_wallet) == PRICE

    clean = reconcile(server, "live", settings)
    assert clean.exit_code == 0, clean.output
    assert clean.drift == []
    assert clean.total("deposits") == (2 * PRICE, 2 * PRICE)
    assert clean.total("hot_wallet") == (PRICE, PRICE)
    assert clean.total("direct_wallet") == (PRICE, PRICE)
    [float_] = [f for f in clean.findings if f["kind"] == "float"]
    assert float_["chain_micros"] == devchain.balance(hot.address) == 2_000_000 - PRICE
    [refill] = [f for f in clean.findings if f["kind"] == "refill"]
    assert refill["chain_micros"] == 2_000_000
    [run] = [r for r in clean.body["runs"]]
    assert run["from_block"] == start

    # (a) a direct token transfer into the deposit address.
    devchain.mint(deposit, 1_234)
    # (b) a settlement the ledger missed: x402's own middleware, paid to our deposit
    # address, settles through the same facilitator without the server knowing.
    with serve(_gated_app(devchain, deposit)) as url:
        await _pay(devchain, url + "/report")

    drifted = reconcile(server, "live", settings)
    assert drifted.exit_code == 1
    unbooked = sorted(
        (f["kind"], f["account"], f["chain_micros"]) for f in drifted.drift if f["kind"] != "total"
    )
    assert unbooked == [
        ("unbooked_in", "deposits", 1_234),
        ("unbooked_in", "deposits", X402_PRICE),
    ]
    assert drifted.total("deposits") == (2 * PRICE, 2 * PRICE + 1_234 + X402_PRICE)
    for finding in drifted.drift:
        if finding["tx_hash"]:
            assert finding["tx_hash"] in drifted.output
    assert "DRIFT" in drifted.output and deposit in drifted.output
    assert [r["drift_count"] for r in history(server)[:4]] == [3, 3, 0, 0]

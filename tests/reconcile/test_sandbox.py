"""``test`` reconciles against the sandbox chain: clean after open-rail payments (to the
deposit address and to a seller's own wallet) and pay-url payments from the hot wallet;
drift when tokens reach the deposit address unbooked, or a receipt names a transaction
the chain does not have."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS
from reference_server.store import tables as t

from ..payurl.helpers import hot_address, make_agent
from ..rails.helpers import PRICE, fund, funded_payer, new_account, open_rail_shop, x402_pay
from ..support import LiveServer
from ..support import new_account as new_owner
from ..topups.helpers import owner_client
from .helpers import history, reconcile

pytestmark = pytest.mark.anyio


async def test_sandbox_books_reconcile_and_drift_is_named(server: LiveServer) -> None:
    deposits = open_rail_shop(server)
    wallet = new_account().address
    direct = open_rail_shop(server, payout_wallet=wallet, path="/v1/direct")
    for shop in (deposits, direct):
        paid = await x402_pay(shop.resource.gate_url, funded_payer(server))
        assert paid.status_code == 200, paid.text
    agent = make_agent(server, fund="1.00")
    for shop in (deposits, direct):  # the hot wallet pays our own gates
        assert agent.pay_url(shop.resource.gate_url).status_code == 200
    # An owner's top-up lands at the deposit address too, booked as a deposit.
    owner = new_owner(server.url)
    owner_client(server.url, owner.owner_jwt).top_ups.create("0.25", payer=funded_payer(server))

    clean = reconcile(server, "test")
    assert clean.exit_code == 0, clean.output
    assert clean.drift == []
    assert clean.total("deposits") == (2 * PRICE + 250_000, 2 * PRICE + 250_000)
    assert clean.total("hot_wallet") == (2 * PRICE, 2 * PRICE)
    assert clean.total("direct_wallet") == (2 * PRICE, 2 * PRICE)
    [refill] = [f for f in clean.findings if f["kind"] == "refill"]
    assert refill["chain_micros"] == 2 * PRICE  # test pay-url mints each payment's amount
    assert "DRIFT" not in clean.output and hot_address(server) in clean.output

    # (a) Tokens reach the deposit address with no receipt: named, exit 1.
    fund(server.url, TEST_DEPOSIT_ADDRESS, "0.5")
    drifted = reconcile(server, "test")
    assert drifted.exit_code == 1
    [unbooked] = [f for f in drifted.drift if f["kind"] not in ("total", "balance")]
    [held] = [f for f in drifted.drift if f["kind"] == "balance"]
    booked = 2 * PRICE + 250_000
    assert (held["ledger_micros"], held["chain_micros"]) == (booked, booked + 500_000)
    assert (unbooked["kind"], unbooked["account"], unbooked["chain_micros"]) == (
        "unbooked_in",
        "deposits",
        500_000,
    )
    assert drifted.total("deposits") == (booked, booked + 500_000)
    assert unbooked["address"] == TEST_DEPOSIT_ADDRESS
    assert unbooked["tx_hash"] in drifted.output and "DRIFT" in drifted.output

    # (b) A direct-wallet receipt naming a transaction the chain never had.
    forged, hot = "0x" + "ab" * 32, hot_address(server)
    with server.ctx.db.write() as conn:
        conn.execute(
            update(t.receipts)
            .where(t.receipts.c.seller_id == direct.seller_id, t.receipts.c.payer != hot)
            .values(tx_hash=forged)
        )
    worse = reconcile(server, "test")
    assert worse.exit_code == 1
    kinds = {(f["kind"], f["account"], f["tx_hash"]) for f in worse.drift}
    assert ("missing_on_chain", "direct_wallet", forged) in kinds
    assert ("unbooked_in", "deposits", unbooked["tx_hash"]) in kinds
    assert worse.total("direct_wallet") == (2 * PRICE, PRICE)

    runs = history(server)
    assert [r["drift_count"] for r in runs[:6]] == [5, 5, 3, 3, 0, 0]
    assert {r["environment"] for r in runs} == {"test"}

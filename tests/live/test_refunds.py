"""Live refunds on the real chain (anvil, the committed token, the official x402
facilitator): an open-rail payment settled ``processor_deposit`` is refunded from the hot
wallet to the payer's address, the refund ``pending`` until the facilitator settled the hot
wallet's signed transfer, then ``succeeded`` with the transaction the chain shows; 20
concurrent partial refunds send exactly the payment; the ledger audit stays sound and the
live reconciliation finds no drift.

The devchain is shared by the whole run, so this server has a deposit address and a hot
wallet (with a float, which the reconciliation reports as a refill) of its own, and reads
the chain from the block the test began at."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from eth_account import Account

from reference_server.domain.paid_fetch.hot_wallet import hot_wallet
from reference_server.domain.refunds_chain import nonce_of
from reference_server.domain.refunds_live import send_transfer

from ..devchain.running import RunningDevchain
from ..money.helpers import events_of
from ..rails.helpers import RailShop, open_rail_shop
from ..reconcile.helpers import reconcile
from ..support import LiveServer, at_once, until
from .helpers import PAYERS, PRICE, receipts_of

pytestmark = pytest.mark.anyio


def _settings(devchain: RunningDevchain) -> tuple[dict[str, Any], str]:
    """A live server's settings: its own deposit address and a hot wallet holding $1."""
    hot = devchain.new_payer(1_000_000)
    settings: dict[str, Any] = {
        **devchain.live_settings(),
        "live_deposit_address": Account.create().address,
        "live_hot_wallet_key": "0x" + bytes(hot.key).hex(),
        "live_reconcile_from_block": int(devchain.web3().eth.block_number) + 1,
    }
    return settings, hot.address


def _server(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> tuple[LiveServer, dict[str, Any], str]:
    settings, hot = _settings(devchain)
    return make_server(**settings), settings, hot


def refund(shop: RailShop, receipt_id: str, amount: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"receipt_id": receipt_id}
    if amount is not None:
        body["amount"] = amount
    headers = {"Authorization": f"Bearer {shop.seller_key}", "Idempotency-Key": str(uuid.uuid4())}
    return httpx.post(f"{shop.live.url}/refunds", json=body, headers=headers, timeout=30)


def sent(shop: RailShop, refund_id: str) -> Any:
    return until(
        lambda: (r := shop.seller.refunds.get(refund_id)).status != "pending" and r,
        f"refund {refund_id} still pending",
        seconds=60,
    )


async def _paid(
    devchain: RunningDevchain, live: LiveServer, shop: RailShop, protocol: str
) -> tuple[str, str]:
    payer = devchain.new_payer(1_000_000)
    paid = await PAYERS[protocol](devchain, shop.resource.gate_url, payer)
    assert paid.status_code == 200, paid.text
    [receipt] = receipts_of(live, shop.resource.id)
    assert (receipt.environment, receipt.settlement) == ("live", "processor_deposit")
    assert devchain.balance(payer.address) == 1_000_000 - PRICE
    return receipt.id, payer.address


@pytest.mark.parametrize("protocol", ["x402", "mpp"])
async def test_a_live_refund_goes_back_on_chain(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer], protocol: str
) -> None:
    live, settings, hot = _server(devchain, make_server)
    shop = open_rail_shop(live, environment="live")
    receipt_id, payer = await _paid(devchain, live, shop, protocol)

    first = refund(shop, receipt_id, "0.10")
    assert first.status_code == 201, first.text
    assert first.json()["status"] == "pending"
    done = sent(shop, first.json()["id"])
    assert done.status == "succeeded", done
    assert devchain.balance(payer) == 1_000_000 - PRICE + 100_000
    mined = devchain.web3().eth.get_transaction_receipt(done.tx_hash)
    assert mined["status"] == 1 and mined["to"] == devchain.asset
    rest = refund(shop, receipt_id)
    assert rest.status_code == 201 and rest.json()["amount"] == "0.15"
    assert sent(shop, rest.json()["id"]).status == "succeeded"
    assert devchain.balance(payer) == 1_000_000  # every cent back
    assert devchain.balance(hot) == 1_000_000 - PRICE
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded, state.remaining) == (
        "refunded",
        Decimal("0.25"),
        Decimal("0.00"),
    )
    assert shop.balance().balance == 0
    over = refund(shop, receipt_id, "0.01")
    assert over.status_code == 409 and over.json()["error"]["code"] == "refund_exceeds_payment"

    clean = reconcile(live, "live", settings)
    assert clean.exit_code == 0 and clean.drift == [], clean.output
    assert clean.total("hot_wallet") == (PRICE, PRICE)


async def test_twenty_concurrent_live_refunds_send_the_payment_once(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    live, settings, hot = _server(devchain, make_server)
    shop = open_rail_shop(live, environment="live")
    receipt_id, payer = await _paid(devchain, live, shop, "x402")
    answers = at_once(20, lambda: refund(shop, receipt_id, "0.025"))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] * 10 + [409] * 10, [r.text for r in answers if r.status_code >= 500]
    refunds = [sent(shop, r.json()["id"]) for r in answers if r.status_code == 201]
    assert {r.status for r in refunds} == {"succeeded"}
    assert len({r.tx_hash for r in refunds}) == 10
    assert devchain.balance(payer) == 1_000_000  # the chain moved the payment, once
    assert devchain.balance(hot) == 1_000_000 - PRICE
    clean = reconcile(live, "live", settings)
    assert clean.exit_code == 0 and clean.drift == [], clean.output


async def test_a_live_refund_nothing_could_send_is_refused_when_asked(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    """A server with no hot wallet cannot send a refund on chain: asked for one, it answers
    503 ``settlement_unavailable`` saying what it lacks, and nothing is held or moved."""
    live = make_server(**{**devchain.live_settings(), "live_hot_wallet_key": None})
    shop = open_rail_shop(live, environment="live")
    receipt_id, payer = await _paid(devchain, live, shop, "x402")
    earned = shop.balance().balance
    r = refund(shop, receipt_id, "0.10")
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "settlement_unavailable"
    assert "SVC_LIVE_HOT_WALLET_KEY" in error["message"]
    assert shop.seller.refunds.list().data == []
    assert shop.balance().balance == earned
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded) == ("settled", Decimal("0"))
    assert devchain.balance(payer) == 1_000_000 - PRICE


async def test_a_live_refund_the_server_can_no_longer_send_fails_and_says_so(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    """Accepted by a server with a hot wallet whose worker did not run, then met by a
    server started without one (its set-up taken away): the refund fails, its hold is
    released (the seller's balance and the payment's remaining amount as before),
    ``payment.refund_failed`` says why, and nothing moved on chain."""
    settings, _hot = _settings(devchain)
    accepting = make_server(**settings, worker_enabled=False)
    shop = open_rail_shop(accepting, environment="live")
    receipt_id, payer = await _paid(devchain, accepting, shop, "x402")
    earned = shop.balance().balance
    r = refund(shop, receipt_id, "0.10")
    assert r.status_code == 201 and r.json()["status"] == "pending", r.text
    assert shop.balance().balance == earned - Decimal("0.099")  # its seller share held

    make_server(**{**settings, "live_hot_wallet_key": None})  # its worker meets the refund
    failed = sent(shop, r.json()["id"])
    assert failed.status == "failed" and failed.tx_hash is None
    assert failed.failure_reason and "SVC_LIVE_HOT_WALLET_KEY" in failed.failure_reason
    assert shop.balance().balance == earned
    state = shop.seller.payments.get(receipt_id)
    assert (state.state, state.refunded, state.remaining) == (
        "settled",
        Decimal("0"),
        Decimal("0.25"),
    )
    (event,) = events_of(accepting, shop.owner_id, "payment.refund_failed")
    assert (event["refund_id"], event["amount"], event["remaining"]) == (
        failed.id,
        "0.10",
        "0.25",
    )
    assert "SVC_LIVE_HOT_WALLET_KEY" in event["failure_reason"]
    assert events_of(accepting, shop.owner_id, "payment.refunded") == []
    assert devchain.balance(payer) == 1_000_000 - PRICE


async def test_a_send_whose_answer_was_lost_is_concluded_from_the_chain_not_resent(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    """The worker sent a refund and stopped before writing it down: the next worker finds
    the refund's nonce used on chain and concludes it with that transaction, sending
    nothing again."""
    settings, hot = _settings(devchain)
    stopped = make_server(**{**settings, "worker_enabled": False})  # no worker
    shop = open_rail_shop(stopped, environment="live")
    receipt_id, payer = await _paid(devchain, stopped, shop, "x402")
    r = refund(shop, receipt_id, "0.10")
    assert r.status_code == 201 and r.json()["status"] == "pending", r.text
    refund_id = r.json()["id"]
    url = settings["live_facilitator_url"]
    wallet = hot_wallet(stopped.ctx, "live")
    now = stopped.ctx.now()
    tx_hash = await send_transfer(url, wallet, payer, 100_000, nonce_of(refund_id), now)
    assert tx_hash is not None
    assert devchain.balance(payer) == 1_000_000 - PRICE + 100_000
    assert shop.seller.refunds.get(refund_id).status == "pending"  # its answer was lost

    make_server(**settings)  # a worker again
    done = sent(shop, refund_id)
    assert (done.status, done.tx_hash) == ("succeeded", tx_hash)
    assert devchain.balance(payer) == 1_000_000 - PRICE + 100_000  # moved once
    assert devchain.balance(hot) == 1_000_000 - 100_000
    clean = reconcile(stopped, "live", settings)
    assert clean.exit_code == 0 and clean.drift == [], clean.output

"""Live gates failing on a real chain: never a credit without a transfer on chain, never
a transfer the books do not settle once the chain says so."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount
from mpp.x402 import decode_payment_signature
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from x402.mechanisms.evm.exact import client as exact_client

import svc
from reference_server.domain.open_rails import resolve_unsettled
from reference_server.onchain import ChainUnreachable, TokenReader
from reference_server.store import tables as t
from svc_asgi import PaymentGate

from ..devchain.running import RunningDevchain, start_devchain, stop_devchain
from ..rails.helpers import RailShop, count_rows, events_of, open_rail_shop
from ..support import LiveApp, LiveServer, free_port
from .apps import facilitator_proxy
from .helpers import PRICE, live_server, open_holds, receipts_of, x402_pay

pytestmark = pytest.mark.anyio


async def _report(request: Request) -> JSONResponse:
    return JSONResponse({"report": "the goods"})


def _shop(live: LiveServer, serve_app: Callable[..., LiveApp], handler: Any = _report) -> RailShop:
    upstream = serve_app(Starlette(routes=[Route("/v1/report", handler)]))
    return open_rail_shop(live, environment="live", upstream_url=f"{upstream.url}/v1/report")


def _nothing_booked(live: LiveServer, shop: RailShop) -> None:
    assert receipts_of(live, shop.resource.id) == []
    assert shop.balance().balance == Decimal("0")
    assert open_holds(live) == []


def _failed_reasons(live: LiveServer, shop: RailShop) -> list[str]:
    return [e["reason"] for e in events_of(live, shop.owner_id, "payment.failed")]


async def test_a_payer_without_the_funds_is_refused_and_nothing_is_booked(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    live = live_server(make_server, devchain)
    shop = _shop(live, serve_app)
    payer = devchain.new_payer(PRICE - 1)
    deposit = devchain.balance(devchain.deposit_address)

    refused = await x402_pay(devchain, shop.resource.gate_url, payer)

    assert refused.status_code == 402
    assert "exceeds balance" in refused.json()["error"]["message"]
    assert devchain.balance(payer.address) == PRICE - 1
    assert devchain.balance(devchain.deposit_address) == deposit
    _nothing_booked(live, shop)
    assert _failed_reasons(live, shop) == ["receipt_refused"]


async def test_an_expired_authorization_is_refused(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """x402's client signs ``validBefore`` = its clock + maxTimeoutSeconds: a client whose
    clock is two hours behind signs one already in the past."""

    class Behind:
        @staticmethod
        def time() -> float:
            return time.time() - 7200

    monkeypatch.setattr(exact_client, "time", Behind)
    live = live_server(make_server, devchain)
    shop = _shop(live, serve_app)
    payer = devchain.new_payer(1_000_000)

    refused = await x402_pay(devchain, shop.resource.gate_url, payer)

    assert refused.status_code == 402
    assert "expired" in refused.json()["error"]["message"].lower()
    assert devchain.balance(payer.address) == 1_000_000
    _nothing_booked(live, shop)


@pytest.mark.parametrize("gate", ["hosted", "svc_asgi"])
async def test_a_facilitator_that_is_down_books_and_holds_nothing(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
    gate: str,
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    live = live_server(make_server, devchain, live_facilitator_url=closed)
    shop = _shop(live, serve_app)
    url = shop.resource.gate_url
    if gate == "svc_asgi":
        service = svc.AsyncClient(base_url=live.url, seller_key=shop.seller_key, max_retries=0)
        app = PaymentGate(
            Starlette(routes=[Route("/v1/report", _report)]),
            prices={"/v1/report": shop.resource.id},
            client=service,  # no retry of the 503: the answer is the test's
        )
        url = serve_app(app).url + "/v1/report"
    payer = devchain.new_payer(1_000_000)

    failed = await x402_pay(devchain, url, payer)

    assert failed.status_code == 503, failed.text
    assert "retry" in failed.json()["error"]["message"]
    assert "payment-required" not in failed.headers
    assert count_rows(live, t.rail_claims) == 0  # the authorization was not used up
    assert devchain.balance(payer.address) == 1_000_000
    _nothing_booked(live, shop)


async def test_a_settlement_whose_answer_is_lost_is_booked_from_the_chain(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    """/settle broadcast the transfer, then the facilitator's host died before answering:
    the gate cannot say (503, no fresh challenge), the chain can."""
    proxy = serve_app(facilitator_proxy(devchain.facilitator_url, settle="after"))
    live = live_server(make_server, devchain, live_facilitator_url=proxy.url)
    shop = _shop(live, serve_app)
    payer = devchain.new_payer(1_000_000)
    deposit = devchain.balance(devchain.deposit_address)

    lost = await x402_pay(devchain, shop.resource.gate_url, payer)

    assert lost.status_code == 503, lost.text
    assert "payment-required" not in lost.headers
    assert devchain.balance(payer.address) == 1_000_000 - PRICE  # it moved on chain
    assert receipts_of(live, shop.resource.id) == []  # not booked yet: nobody said so
    assert len(open_holds(live)) == 1

    assert resolve_unsettled(live.ctx) == 1
    assert resolve_unsettled(live.ctx) == 0  # decided once

    [receipt] = receipts_of(live, shop.resource.id)
    moved = devchain.web3().eth.get_transaction_receipt(receipt.tx_hash)
    assert moved["status"] == 1 and moved["to"] == devchain.asset
    assert devchain.balance(devchain.deposit_address) == deposit + PRICE
    assert shop.balance().balance == Decimal("0.2475")
    assert open_holds(live) == []
    assert len(events_of(live, shop.owner_id, "payment.succeeded")) == 1


async def test_a_settlement_never_broadcast_is_released_once_it_expires(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    proxy = serve_app(facilitator_proxy(devchain.facilitator_url, settle="before"))
    live = live_server(make_server, devchain, live_facilitator_url=proxy.url)
    shop = _shop(live, serve_app)
    payer = devchain.new_payer(1_000_000)

    lost = await x402_pay(devchain, shop.resource.gate_url, payer)

    assert lost.status_code == 503, lost.text
    assert len(open_holds(live)) == 1
    assert resolve_unsettled(live.ctx) == 0  # unused but still valid: it could yet settle
    assert len(open_holds(live)) == 1

    later = live.ctx.now() + timedelta(hours=2)  # past its validBefore
    assert resolve_unsettled(live.ctx, now=later) == 1

    assert devchain.balance(payer.address) == 1_000_000
    _nothing_booked(live, shop)
    assert _failed_reasons(live, shop) == ["settlement_refused"]


def _drain(devchain: RunningDevchain, payer: LocalAccount) -> None:
    """The payer moves all its tokens away (anvil lends it gas and its signature)."""
    w3 = devchain.web3()
    w3.provider.make_request("anvil_setBalance", [payer.address, hex(10**18)])  # type: ignore[arg-type]
    w3.provider.make_request("anvil_impersonateAccount", [payer.address])  # type: ignore[arg-type]
    everything = devchain.balance(payer.address)
    sink = devchain.new_payer(0).address
    sent = devchain.token().functions.transfer(sink, everything).transact({"from": payer.address})
    assert w3.eth.wait_for_transaction_receipt(sent, timeout=30)["status"] == 1


async def test_funds_moved_away_between_verify_and_settle_settle_nothing(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    payer = devchain.new_payer(1_000_000)

    async def draining(request: Request) -> JSONResponse:
        _drain(devchain, payer)  # verified and claimed; the answer is being made
        return await _report(request)

    live = live_server(make_server, devchain)
    shop = _shop(live, serve_app, draining)
    deposit = devchain.balance(devchain.deposit_address)

    refused = await x402_pay(devchain, shop.resource.gate_url, payer)

    assert refused.status_code == 402, refused.text
    assert "could not be settled" in refused.json()["error"]["message"]
    assert devchain.balance(payer.address) == 0
    assert devchain.balance(devchain.deposit_address) == deposit
    _nothing_booked(live, shop)
    assert _failed_reasons(live, shop) == ["settlement_refused"]


def test_the_reader_says_when_the_node_is_down() -> None:
    reader = TokenReader(f"http://127.0.0.1:{free_port()}", "0x" + "11" * 20, timeout=2)
    with pytest.raises(ChainUnreachable):
        reader.balance_of("0x" + "22" * 20)


async def test_an_authorization_broadcast_by_someone_else_first_is_booked_from_the_chain(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    devchain: RunningDevchain,
) -> None:
    """The seller's app, holding the payer's signed authorization while it answers, sends
    it on chain itself: the facilitator's /settle is refused (nonce used), yet the tokens
    reached the payee, so the gate books the transaction that moved them."""
    sent: list[str] = []

    async def front_running(request: Request) -> JSONResponse:
        payment: Any = decode_payment_signature(request.headers["payment-signature"])
        auth, signature = payment["payload"]["authorization"], payment["payload"]["signature"]
        raw = bytes.fromhex(signature.removeprefix("0x"))
        w3 = devchain.web3()
        call = devchain.token().functions.transferWithAuthorization(
            auth["from"],
            auth["to"],
            int(auth["value"]),
            int(auth["validAfter"]),
            int(auth["validBefore"]),
            bytes.fromhex(auth["nonce"].removeprefix("0x")),
            raw[64],
            raw[:32],
            raw[32:64],
        )
        tx = call.transact({"from": w3.eth.accounts[0]})
        assert w3.eth.wait_for_transaction_receipt(tx, timeout=30)["status"] == 1
        sent.append("0x" + bytes(tx).hex())
        return await _report(request)

    live = live_server(make_server, devchain)
    shop = open_rail_shop(live, environment="live")
    gate = PaymentGate(
        Starlette(routes=[Route("/v1/report", front_running)]),
        prices={"/v1/report": shop.resource.id},
        service_url=live.url,
        seller_key=shop.seller_key,
    )
    payer = devchain.new_payer(1_000_000)
    deposit = devchain.balance(devchain.deposit_address)

    paid = await x402_pay(devchain, serve_app(gate).url + "/v1/report", payer)

    assert paid.status_code == 200, paid.text
    [receipt] = receipts_of(live, shop.resource.id)
    assert receipt.tx_hash == sent[0]
    assert devchain.balance(payer.address) == 1_000_000 - PRICE
    assert devchain.balance(devchain.deposit_address) == deposit + PRICE
    assert shop.balance().balance == Decimal("0.2475")
    assert open_holds(live) == []


def _command(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_text()


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]


async def test_a_node_down_mid_settle_leaves_the_payment_for_the_chain_to_decide(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
) -> None:
    """A private devchain (the shared one stays up): verified, served, then its node dies
    before settling.  The facilitator refuses (it cannot check the signature without a
    node), but neither can the service ask the chain whether it settled: the gate answers
    503, nothing is booked or released, and housekeeping waits while the node is down."""
    private = start_devchain()
    try:
        [anvil] = [child for child in _children(private.process.pid) if "anvil" in _command(child)]

        async def node_dies(request: Request) -> JSONResponse:
            os.kill(anvil, signal.SIGKILL)
            return await _report(request)

        live = live_server(make_server, private)
        shop = _shop(live, serve_app, node_dies)
        payer = private.new_payer(1_000_000)

        lost = await x402_pay(private, shop.resource.gate_url, payer)

        assert lost.status_code == 503, lost.text
        assert "payment-required" not in lost.headers
        assert receipts_of(live, shop.resource.id) == []
        assert len(open_holds(live)) == 1
        later = live.ctx.now() + timedelta(hours=2)
        assert resolve_unsettled(live.ctx, now=later) == 0  # the node cannot say: it waits
        assert len(open_holds(live)) == 1
        assert shop.balance().balance == Decimal("0")
    finally:
        stop_devchain(private.process)

"""A metered, streamed answer at a seller's own app: 200 SSE tokens over about two seconds
from a Starlette app behind ``svc_asgi.PaymentGate``, paid by the official x402 client with
``upto``.  The tokens pass through as they are made, and the payment settled after the last
one is exactly the tokens delivered times the unit price, named by the final
``svc-receipt`` event (issue 27's first Done-when, on the sandbox chain)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

import svc
from svc_asgi import PaymentGate
from svc_asgi import Route as GateRoute

from ..live.helpers import open_holds
from ..money.helpers import Market, market
from ..sandbox.helpers import assert_chain_sound
from ..support import LiveApp, LiveServer, until
from ..support import new_account as new_service_account
from .helpers import RailShop, balance, funded_payer, get, receipts_of
from .streaming import TokenApp, read_events, upto_client, upto_credential

pytestmark = pytest.mark.anyio

UNIT_PRICE = Decimal("0.0001")
TOKENS = 200


def metered_shop(live: LiveServer) -> RailShop:
    """A seller selling ``GET /v1/stream`` by the token (0.0001, at most 0.50), payments on."""
    account = new_service_account(live.url)
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    resource = seller.resources.create(
        kind="http",
        path="/v1/stream",
        pricing="metered",
        unit_price=str(UNIT_PRICE),
        unit="token",
        max_amount="0.50",
    )
    seller.sellers.enable_payments()
    return RailShop(
        live=live,
        seller_key=account.seller_key,
        seller=seller,
        owner_id=account.owner_id,
        seller_id=account.seller_id,
        resource=resource,
        payout_wallet=None,
    )


async def test_two_hundred_tokens_stream_through_and_settle_what_was_delivered(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = metered_shop(server)
    payer = funded_payer(server)
    before = balance(server.url, payer.address)
    tokens = TokenApp()
    gate = PaymentGate(
        tokens.app(),
        service_url=server.url,
        seller_key=shop.seller_key,
        prices={"GET /v1/stream": shop.resource.id},
    )
    url = serve_app(gate).url + "/v1/stream"

    events, response = await read_events(url, await upto_credential(url, upto_client(payer)))

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    data = [text for _, text in events if text.startswith("data: tok")]
    assert data == [f"data: tok{i}" for i in range(TOKENS)]
    assert tokens.last_made is not None
    assert events[0][0] < tokens.last_made, "the first token waited for the last"
    *_, (_, final) = events
    name, payload = final.split("\n", 1)
    assert name == "event: svc-receipt"
    receipt = json.loads(payload.removeprefix("data: "))
    assert receipt["units"] == TOKENS
    assert Decimal(receipt["amount"]) == TOKENS * UNIT_PRICE
    [row] = receipts_of(server, shop.resource.id)
    assert row.id == receipt["receipt_id"]
    assert (row.amount_micros, row.units, row.max_amount_micros) == (20_000, TOKENS, 500_000)
    assert before - balance(server.url, payer.address) == 20_000  # atomic USDC: the 0.02
    assert_chain_sound(server.ctx.db)


async def test_a_payer_who_leaves_mid_stream_pays_for_what_was_reported(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = metered_shop(server)
    payer = funded_payer(server)
    before = balance(server.url, payer.address)
    tokens = TokenApp(tokens=400, gap=0.02)
    gate = PaymentGate(
        tokens.app(),
        service_url=server.url,
        seller_key=shop.seller_key,
        prices={"GET /v1/stream": shop.resource.id},
    )
    url = serve_app(gate).url + "/v1/stream"
    headers = await upto_credential(url, upto_client(payer))

    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("GET", url, headers=headers) as response,
    ):
        seen = 0
        async for chunk in response.aiter_text():
            seen += chunk.count("data: tok")
            if seen >= 20:
                break  # leaves: closes the connection

    [row] = await anyio.to_thread.run_sync(lambda: _settled_receipt(server, shop.resource.id))
    assert 20 <= row.units < 400
    assert Decimal(row.amount_micros) / 1_000_000 == row.units * UNIT_PRICE
    assert before - balance(server.url, payer.address) == row.amount_micros
    assert_chain_sound(server.ctx.db)


def _settled_receipt(server: LiveServer, resource_id: str) -> list[Any]:
    return until(lambda: list(receipts_of(server, resource_id)) or None, "no settlement")


@pytest.mark.parametrize("on_failure", ["settle", "release"])
async def test_an_app_that_breaks_off_midway_settles_what_it_reported_or_nothing(
    server: LiveServer, serve_app: Callable[..., LiveApp], on_failure: str
) -> None:
    shop = metered_shop(server)
    payer = funded_payer(server)
    before = balance(server.url, payer.address)
    gate = PaymentGate(
        TokenApp(fail_after=30).app(),
        service_url=server.url,
        seller_key=shop.seller_key,
        prices={"GET /v1/stream": GateRoute(shop.resource.id, on_failure=on_failure)},  # type: ignore[arg-type]
    )
    url = serve_app(gate).url + "/v1/stream"
    headers = await upto_credential(url, upto_client(payer))

    with pytest.raises(httpx.RemoteProtocolError):  # the answer ends unfinished
        await read_events(url, headers)

    def decided() -> bool:
        return not open_holds(server)

    await anyio.to_thread.run_sync(lambda: until(decided, "the claim was never decided"))
    receipts = receipts_of(server, shop.resource.id)
    if on_failure == "settle":
        [row] = receipts
        assert (row.units, row.amount_micros) == (30, 3_000)
        assert before - balance(server.url, payer.address) == 3_000
    else:
        assert receipts == [] and balance(server.url, payer.address) == before
    assert_chain_sound(server.ctx.db)


# --- the ledger rail: POST /pay holds the maximum, the gate captures what was delivered ----


def _metered_market(server: LiveServer) -> tuple[Market, svc.Resource]:
    m = market(server)
    resource = m.seller.resources.create(
        kind="http",
        path="/v1/stream",
        pricing="metered",
        unit_price=str(UNIT_PRICE),
        unit="token",
        max_amount="0.50",
    )
    return m, resource


async def test_a_ledger_receipt_streams_and_is_captured_for_the_tokens_delivered(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    m, resource = _metered_market(server)
    tokens = TokenApp()
    gate = PaymentGate(
        tokens.app(),
        service_url=server.url,
        seller_key=m.seller_key,
        prices={"GET /v1/stream": resource.id},
    )
    url = serve_app(gate).url + "/v1/stream"
    paid = m.agent.pay(resource_id=resource.id)  # holds the 0.50 maximum

    events, response = await read_events(url, {"X-Svc-Receipt": paid.receipt_id})

    assert response.status_code == 200
    assert tokens.last_made is not None and events[0][0] < tokens.last_made
    name, data = events[-1][1].split("\n", 1)
    assert name == "event: svc-receipt"
    receipt = json.loads(data.removeprefix("data: "))
    assert (receipt["receipt_id"], receipt["amount"], receipt["units"]) == (
        paid.receipt_id,
        "0.02",
        TOKENS,
    )
    captured = m.agent.receipts.get(paid.receipt_id)
    assert (captured.status, captured.amount, captured.units) == ("settled", Decimal("0.02"), 200)
    assert m.agent.spend.balance().balance == Decimal("99.98")
    # single use: the captured receipt opens nothing more
    again = get(url, {"X-Svc-Receipt": paid.receipt_id})
    assert again.status_code == 402


async def test_a_ledger_payer_who_leaves_is_charged_for_what_was_reported(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    m, resource = _metered_market(server)
    tokens = TokenApp(tokens=400, gap=0.02)
    gate = PaymentGate(
        tokens.app(),
        service_url=server.url,
        seller_key=m.seller_key,
        prices={"GET /v1/stream": resource.id},
    )
    url = serve_app(gate).url + "/v1/stream"
    paid = m.agent.pay(resource_id=resource.id)

    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream("GET", url, headers={"X-Svc-Receipt": paid.receipt_id}) as response,
    ):
        seen = 0
        async for chunk in response.aiter_text():
            seen += chunk.count("data: tok")
            if seen >= 20:
                break

    def captured() -> svc.Receipt | None:
        found = m.agent.receipts.get(paid.receipt_id)
        return found if found.status == "settled" else None

    receipt = await anyio.to_thread.run_sync(lambda: until(captured, "never captured"))
    assert receipt.units is not None and 20 <= receipt.units < 400
    assert receipt.amount == receipt.units * UNIT_PRICE
    assert m.agent.spend.balance().balance == Decimal("100") - receipt.amount


# --- hosted gates: the upstream streams, the service's gate_url relays and meters it -------


def _upstream(tokens: int) -> Starlette:
    """A seller's upstream behind a hosted gate: ``/sse`` streams ``tokens`` events, each
    followed by an ``svc-usage`` event; ``/whole`` answers JSON with ``X-Svc-Usage``."""

    async def sse(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            for i in range(tokens):
                await anyio.sleep(0.005)
                yield f"data: tok{i}\n\nevent: svc-usage\ndata: 1\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    async def whole(request: Request) -> JSONResponse:
        return JSONResponse({"answer": "42"}, headers={"X-Svc-Usage": "137"})

    return Starlette(routes=[Route("/sse", sse), Route("/whole", whole)])


def _hosted_metered(server: LiveServer, upstream_url: str) -> svc.Resource:
    shop = metered_shop(server)
    return shop.seller.resources.update(shop.resource.id, upstream_url=upstream_url)


async def test_a_hosted_gate_relays_a_stream_and_settles_the_usage_its_upstream_reported(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    upstream = serve_app(_upstream(50))
    resource = _hosted_metered(server, upstream.url + "/sse")
    payer = funded_payer(server)
    before = balance(server.url, payer.address)
    url = resource.gate_url

    events, response = await read_events(url, await upto_credential(url, upto_client(payer)))

    assert response.status_code == 200
    texts = [text for _, text in events]
    assert texts[:-1] == [f"data: tok{i}" for i in range(50)]  # usage events taken out
    name, data = texts[-1].split("\n", 1)
    assert name == "event: svc-receipt"
    receipt = json.loads(data.removeprefix("data: "))
    assert (receipt["units"], Decimal(receipt["amount"])) == (50, Decimal("0.005"))
    [row] = receipts_of(server, resource.id)
    assert (row.id, row.amount_micros, row.units) == (receipt["receipt_id"], 5_000, 50)
    assert before - balance(server.url, payer.address) == 5_000
    assert_chain_sound(server.ctx.db)


async def test_a_hosted_gate_settles_a_whole_answer_for_its_x_svc_usage(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    upstream = serve_app(_upstream(0))
    resource = _hosted_metered(server, upstream.url + "/whole")
    payer = funded_payer(server)
    url = resource.gate_url
    headers = await upto_credential(url, upto_client(payer))

    async with httpx.AsyncClient() as http:
        answer = await http.get(url, headers=headers)

    assert answer.status_code == 200 and answer.json() == {"answer": "42"}
    assert "x-svc-usage" not in answer.headers  # the seller's business, not the payer's
    [row] = receipts_of(server, resource.id)
    assert (row.amount_micros, row.units) == (13_700, 137)
    assert answer.headers["x-svc-receipt"] == row.id

"""PaymentGate in front of a Starlette app on a real uvicorn server, against a real
reference server: 402, paid, refused, malformed, credits, failures, cache, single flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

import svc
from svc_asgi import GATE_ERROR_STATE_KEY, PaymentGate, payment_of

from ..support import LiveApp, LiveServer, free_port
from .support import CountingTransport, Shop, open_shop, seller_client


async def _report(request: Request) -> JSONResponse:
    payment = payment_of(request)
    credits = payment.credits if payment else None
    named = ("receipt_id", "resource_id", "sku_kind", "credit_unit", "source")
    return JSONResponse(
        {
            "paid": payment is not None,
            **{name: getattr(payment, name, None) for name in named},  # all None unpaid
            "credits": None if credits is None else str(credits),
            "gate_error": request.scope.get("state", {}).get(GATE_ERROR_STATE_KEY),
        }
    )


async def _free(request: Request) -> PlainTextResponse:
    return PlainTextResponse("free", headers={"X-Free": "yes"})


async def _ws(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("hello " + websocket.url.path)
    await websocket.close()


def seller_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/report", _report, methods=["GET", "POST"]),
            Route("/v1/items/{item_id}", _report, methods=["GET", "DELETE"]),
            Route("/v1/topup", _report, methods=["POST"]),
            Route("/free", _free),
            WebSocketRoute("/ws", _ws),
        ]
    )


def gate(m: Shop, server: LiveServer, app: Any = None, **kwargs: Any) -> PaymentGate:
    """``app`` (the seller app unless given) behind a gate that asks ``server`` as the
    shop's seller, or through ``client=``."""
    prices = kwargs.pop("prices", None) or {
        "GET /v1/report": m.resource.id,
        "/v1/items/{item_id}": m.resource.id,
    }
    if "client" not in kwargs:
        kwargs.setdefault("service_url", server.url)
        kwargs.setdefault("seller_key", m.seller_key)
    return PaymentGate(app or seller_app(), prices=prices, **kwargs)


@pytest.fixture
def shop(server: LiveServer) -> Shop:
    return open_shop(server)


def test_unpaid_request_gets_402_naming_what_to_pay(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report")
    assert r.status_code == 402, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == "payment_required"
    assert body["request_id"].startswith("req_") and r.headers["x-request-id"] == body["request_id"]
    details = body["error"]["details"]
    assert details["resource_id"] == shop.resource.id
    assert details["amount"] == "0.05" and details["currency"] == "USD"
    assert details["gate_url"] == shop.resource.gate_url
    assert details["pay_url"] == shop.resource.pay_url
    assert details["reason"] == "receipt_missing" and details["environment"] == "test"
    assert "X-Svc-Receipt" in details["receipt_headers"]
    # Every spelling of the priced route is priced: HEAD of a GET, a trailing slash, params.
    assert httpx.head(app.url + "/v1/report").status_code == 402
    assert httpx.get(app.url + "/v1/report/").status_code == 402
    assert httpx.delete(app.url + "/v1/items/42").status_code == 402
    # POST /v1/report is not priced ("GET /v1/report" is): the app answers it for free.
    assert httpx.post(app.url + "/v1/report").json()["paid"] is False


def test_a_paid_receipt_reaches_the_handler(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    app = serve_app(gate(shop, server))
    paid = shop.agent.pay(resource_id=shop.resource.id)
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "paid": True,
        "receipt_id": paid.receipt_id,
        "resource_id": shop.resource.id,
        "sku_kind": "one_shot",
        "credits": None,
        "credit_unit": None,
        "source": "header",
        "gate_error": None,
    }
    assert r.headers["x-svc-receipt"] == paid.receipt_id
    assert r.headers["cache-control"] == "private"  # never served to the next caller
    item = httpx.get(app.url + "/v1/items/7", headers={"Payment-Receipt": paid.receipt_id})
    assert item.status_code == 200 and item.json()["receipt_id"] == paid.receipt_id


def test_a_test_client_without_with_runs_each_request_in_a_new_loop(
    server: LiveServer, shop: Shop
) -> None:
    """Starlette's ``TestClient`` used without ``with`` runs every request in an event
    loop of its own: the gate's client to the service must not reuse a connection of a
    loop that is gone (it answered 503 ``gate_misconfigured``: "Event loop is closed")."""
    paid = shop.agent.pay(resource_id=shop.resource.id)
    http = TestClient(gate(shop, server, cache_ttl=0))  # every request asks the service
    for _ in range(3):
        r = http.get("/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
        assert r.status_code == 200, r.text
        assert r.json()["receipt_id"] == paid.receipt_id


def test_a_receipt_for_another_resource_is_refused(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    other = shop.seller.resources.create(kind="http", path="/v1/other", amount="0.01")
    app = serve_app(gate(shop, server))
    paid = shop.agent.pay(resource_id=other.id)
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 402
    error = r.json()["error"]
    assert error["details"]["reason"] == "receipt_refused"
    assert "another resource" in error["message"]
    assert error["details"]["resource_id"] == shop.resource.id


def test_a_receipt_of_another_seller_is_refused(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    stranger = open_shop(server)
    paid = stranger.agent.pay(resource_id=stranger.resource.id)
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 402 and r.json()["error"]["details"]["reason"] == "receipt_refused"


@pytest.mark.parametrize("receipt", ["rcpt_forged0000000000000000", "rcpt_" + "A" * 26])
def test_forged_or_unknown_receipts_are_refused(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp], receipt: str
) -> None:
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": receipt})
    assert r.status_code == 402
    error = r.json()["error"]
    assert error["details"]["reason"] == "receipt_refused"
    assert error["details"]["refused_because"] == "unknown receipt"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("PAYMENT-RESPONSE", "%%%not-base64%%%"),
        ("Payment-Receipt", "eyJub3QiOiAiYSByZWNlaXB0In0"),  # {"not": "a receipt"}
        ("X-Svc-Receipt", "x" * 9000),
    ],
)
def test_a_malformed_receipt_is_a_402_with_the_reason(
    server: LiveServer,
    shop: Shop,
    serve_app: Callable[..., LiveApp],
    header: str,
    value: str,
) -> None:
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report", headers={header: value})
    assert r.status_code == 402, r.text
    error = r.json()["error"]
    assert error["details"]["reason"] == "receipt_malformed"
    assert error["message"].startswith("Malformed receipt:")
    assert len(error["message"]) < 200  # a reason, not an echo of the input


def test_credit_topup_credits_reach_the_handler(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    topup = shop.seller.resources.create(
        kind="http",
        path="/v1/topup",
        amount="0.50",
        metadata={"sku_kind": "credit_topup", "credits": 100, "credit_unit": "tokens"},
    )
    app = serve_app(gate(shop, server, prices={"POST /v1/topup": topup.id}))
    unpaid = httpx.post(app.url + "/v1/topup").json()["error"]["details"]
    assert unpaid["sku_kind"] == "credit_topup"
    assert unpaid["credits"] == 100 and unpaid["credit_unit"] == "tokens"
    paid = shop.agent.pay(resource_id=topup.id)
    r = httpx.post(app.url + "/v1/topup", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 200, r.text
    assert r.json()["sku_kind"] == "credit_topup"
    assert r.json()["credits"] in ("100", "100.00") and r.json()["credit_unit"] == "tokens"


def test_service_down_fails_closed_with_503(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    app = serve_app(gate(shop, server, service_url=f"http://127.0.0.1:{free_port()}"))
    for headers in ({}, {"X-Svc-Receipt": "rcpt_whatever0000000000"}):
        r = httpx.get(app.url + "/v1/report", headers=headers)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "payment_service_unavailable"
        assert r.headers["retry-after"] == "5" and r.headers["cache-control"] == "no-store"
    assert httpx.get(app.url + "/free").text == "free"  # unpriced routes do not care


def test_service_5xx_fails_closed_and_fail_open_lets_requests_through_unpaid(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    def client() -> svc.AsyncClient:
        return svc.AsyncClient(
            base_url="http://svc.invalid",
            seller_key=shop.seller_key,
            transport=httpx.MockTransport(broken),
            max_retries=0,
        )

    closed = serve_app(gate(shop, server, client=client()))
    r = httpx.get(closed.url + "/v1/report", headers={"X-Svc-Receipt": "rcpt_any00000000"})
    assert r.status_code == 503

    opened = serve_app(gate(shop, server, client=client(), on_service_error="fail_open"))
    r = httpx.get(opened.url + "/v1/report", headers={"X-Svc-Receipt": "rcpt_any00000000"})
    assert r.status_code == 200
    assert r.json()["paid"] is False and r.json()["gate_error"] == "service_unavailable"


def test_a_misconfigured_gate_fails_closed_even_when_failing_open(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    stranger = open_shop(server)  # a resource of another seller: not ours to sell
    prices = {"GET /v1/report": stranger.resource.id}
    app = serve_app(gate(shop, server, prices=prices, on_service_error="fail_open"))
    r = httpx.get(app.url + "/v1/report")
    assert r.status_code == 503 and r.json()["error"]["code"] == "gate_misconfigured"
    with pytest.raises(svc.ConfigurationError):
        PaymentGate(seller_app(), prices={"/x": "res_x"}, service_url=server.url, seller_key="")


def test_a_deactivated_resource_is_not_sold(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    paid = shop.agent.pay(resource_id=shop.resource.id)
    shop.seller.resources.deactivate(shop.resource.id)
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 409 and r.json()["error"]["code"] == "resource_inactive"


def test_a_cached_receipt_is_not_verified_again(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    counting = CountingTransport()
    app = serve_app(gate(shop, server, client=seller_client(server.url, shop.seller_key, counting)))
    paid = shop.agent.pay(resource_id=shop.resource.id)
    with httpx.Client(base_url=app.url) as http:
        for _ in range(5):
            r = http.get("/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
            assert r.status_code == 200
        for _ in range(3):
            assert http.get("/v1/report").status_code == 402
    assert counting.calls["POST /access/verify"] == 1
    assert counting.calls[f"GET /resources/{shop.resource.id}"] == 1


def test_cache_ttl_zero_asks_every_time(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    counting = CountingTransport()
    client = seller_client(server.url, shop.seller_key, counting)
    app = serve_app(gate(shop, server, client=client, cache_ttl=0))
    paid = shop.agent.pay(resource_id=shop.resource.id)
    for _ in range(3):
        r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
        assert r.status_code == 200
    assert counting.calls["POST /access/verify"] == 3


def test_concurrent_requests_with_one_new_receipt_verify_once(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    counting = CountingTransport(delay=0.3)  # keep the first verify in flight meanwhile
    app = serve_app(gate(shop, server, client=seller_client(server.url, shop.seller_key, counting)))
    paid = shop.agent.pay(resource_id=shop.resource.id)

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=app.url) as http:
            answers = await asyncio.gather(
                *(
                    http.get("/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
                    for _ in range(25)
                )
            )
        return [a.status_code for a in answers]

    assert asyncio.run(burst()) == [200] * 25
    assert counting.calls["POST /access/verify"] == 1
    assert counting.calls[f"GET /resources/{shop.resource.id}"] == 1


def test_unpriced_routes_and_non_http_scopes_pass_through(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    from contextlib import asynccontextmanager

    from websockets.sync.client import connect

    started: list[bool] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        started.append(True)
        yield

    inner = seller_app()
    inner.router.lifespan_context = lifespan
    counting = CountingTransport()
    app = serve_app(
        gate(shop, server, inner, client=seller_client(server.url, shop.seller_key, counting))
    )
    assert started == [True]  # lifespan reached the app
    r = httpx.get(app.url + "/free")
    assert r.status_code == 200 and r.text == "free" and r.headers["x-free"] == "yes"
    assert "cache-control" not in r.headers and "x-svc-receipt" not in r.headers
    with connect(app.url.replace("http", "ws") + "/ws") as ws:
        assert ws.recv() == "hello /ws"
    assert sum(counting.calls.values()) == 0  # nothing asked the service

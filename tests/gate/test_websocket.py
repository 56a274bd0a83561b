"""PaymentGate in front of WebSocket routes: an unpaid handshake to a priced path never
reaches the app (a 402 denial response on a real uvicorn, a close before accept where
the server has no denial extension); a paid one does, verified like an HTTP request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from svc_asgi import PaymentGate, payment_of

from ..rails.helpers import RailShop, decode, fresh_credential, funded_payer, open_rail_shop
from ..support import LiveApp, LiveServer
from .support import CountingTransport, Shop, open_shop, seller_client


class EchoApp:
    """A Starlette app with an echo WebSocket at ``/ws/feed``; remembers who got in."""

    def __init__(self) -> None:
        self.entered: list[str | None] = []
        self.app = Starlette(routes=[WebSocketRoute("/ws/feed", self.feed)])

    async def feed(self, websocket: WebSocket) -> None:
        payment = payment_of(websocket.scope)
        self.entered.append(payment.receipt_id if payment else None)
        await websocket.accept()
        async for text in websocket.iter_text():
            await websocket.send_text(f"echo {text}")


def ws_url(app: LiveApp) -> str:
    return app.url.replace("http://", "ws://") + "/ws/feed"


def gated(shop: Shop | RailShop, server: LiveServer, app: Any, **kwargs: Any) -> PaymentGate:
    """``app`` behind a gate pricing ``/ws/feed`` at the shop's resource."""
    if "client" not in kwargs:
        kwargs.update(service_url=server.url, seller_key=shop.seller_key)
    return PaymentGate(app, prices={"/ws/feed": shop.resource.id}, **kwargs)


@attrs.frozen
class Denied:
    """The HTTP answer to a handshake that was not accepted."""

    status_code: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def refused_handshake(url: str, **kwargs: Any) -> Denied:
    with pytest.raises(InvalidStatus) as caught, connect(url, **kwargs):
        pass
    response = caught.value.response
    headers = {name.lower(): value for name, value in response.headers.raw_items()}
    return Denied(response.status_code, headers, response.body or b"")


@pytest.fixture
def shop(server: LiveServer) -> Shop:
    return open_shop(server)


def test_unpaid_handshake_gets_the_402_and_never_reaches_the_app(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    echo = EchoApp()
    app = serve_app(gated(shop, server, echo.app))

    denied = refused_handshake(ws_url(app))

    assert denied.status_code == 402
    assert denied.headers["content-type"] == "application/json"
    assert denied.headers["cache-control"] == "no-store"
    body = denied.json()
    assert body["ok"] is False and body["error"]["code"] == "payment_required"
    assert body["request_id"] == denied.headers["x-request-id"]
    details = body["error"]["details"]
    assert details["reason"] == "receipt_missing"
    assert details["resource_id"] == shop.resource.id and details["amount"] == "0.05"
    # The very envelope an HTTP request to the same priced path gets.
    over_http = httpx.get(app.url + "/ws/feed")
    assert over_http.status_code == 402
    assert over_http.json()["error"] == body["error"]
    # A forged receipt is refused the same way.
    forged = refused_handshake(ws_url(app), additional_headers={"X-Svc-Receipt": "rcpt_nope"})
    assert forged.status_code == 402
    assert forged.json()["error"]["details"]["reason"] == "receipt_refused"
    assert echo.entered == []


def test_paid_handshake_reaches_the_app_verified_through_the_same_cache(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    echo = EchoApp()
    counting = CountingTransport()
    client = seller_client(server.url, shop.seller_key, counting)
    app = serve_app(gated(shop, server, echo.app, client=client))
    paid = shop.agent.pay(resource_id=shop.resource.id)
    # Confirmed once over HTTP (a 404 from the app: it serves no HTTP here, but it was let in)...
    assert (
        httpx.get(app.url + "/ws/feed", headers={"X-Svc-Receipt": paid.receipt_id}).status_code
        != 402
    )
    # ...and the handshake with the same receipt is decided from that answer.
    with connect(ws_url(app), additional_headers={"X-Svc-Receipt": paid.receipt_id}) as ws:
        assert ws.response is not None
        assert ws.response.headers["x-svc-receipt"] == paid.receipt_id
        ws.send("hello")
        assert ws.recv() == "echo hello"
    assert echo.entered == [paid.receipt_id]
    assert counting.calls["POST /access/verify"] == 1


def test_unpriced_websocket_paths_pass_untouched(
    server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]
) -> None:
    echo = EchoApp()
    counting = CountingTransport()
    app = serve_app(
        PaymentGate(
            echo.app,
            prices={"GET /v1/report": shop.resource.id},
            client=seller_client(server.url, shop.seller_key, counting),
        )
    )
    with connect(ws_url(app)) as ws:
        assert ws.response is not None and "x-svc-receipt" not in ws.response.headers
        ws.send("free")
        assert ws.recv() == "echo free"
    assert echo.entered == [None]
    assert sum(counting.calls.values()) == 0


def test_without_the_denial_extension_the_handshake_is_closed_before_accept(
    server: LiveServer, shop: Shop
) -> None:
    """A server that cannot send an HTTP answer to a handshake (no
    ``websocket.http.response`` in ``scope["extensions"]``): close with 1008."""
    called: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope)

    gate = gated(shop, server, app)
    sent: list[dict[str, Any]] = []

    async def handshake(extensions: dict[str, Any] | None) -> list[dict[str, Any]]:
        sent.clear()
        inbox = [{"type": "websocket.connect"}]

        async def receive() -> dict[str, Any]:
            return inbox.pop(0) if inbox else {"type": "websocket.disconnect", "code": 1000}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope: dict[str, Any] = {
            "type": "websocket",
            "asgi": {"version": "3.0"},
            "scheme": "ws",
            "path": "/ws/feed",
            "raw_path": b"/ws/feed",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"shop.example")],
            "server": ("127.0.0.1", 80),
            "subprotocols": [],
        }
        if extensions is not None:
            scope["extensions"] = extensions
        await gate(scope, receive, send)
        return list(sent)

    async def both() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        try:
            return await handshake(None), await handshake({"websocket.http.response": {}})
        finally:
            await gate.aclose()

    closed, denied = anyio.run(both)
    assert called == []
    [close] = closed
    assert close["type"] == "websocket.close" and close["code"] == 1008
    assert close["reason"].startswith("402 payment_required: ")
    assert len(close["reason"].encode()) <= 123
    # With the extension, the same handshake gets the 402 itself, in two messages.
    assert [m["type"] for m in denied] == [
        "websocket.http.response.start",
        "websocket.http.response.body",
    ]
    assert denied[0]["status"] == 402
    assert json.loads(denied[1]["body"])["error"]["code"] == "payment_required"


@pytest.mark.anyio
async def test_an_open_rail_credential_pays_the_handshake(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    """A challenge got over HTTP (or from the handshake's own 402) binds the http(s) URL
    the handshake is a GET of, so its credential pays the handshake, settled once."""
    shop = open_rail_shop(server, path="/ws/feed")
    echo = EchoApp()
    app = serve_app(gated(shop, server, echo.app))
    denied = await anyio.to_thread.run_sync(refused_handshake, ws_url(app))
    assert denied.status_code == 402
    challenge = decode(denied.headers["payment-required"])
    assert challenge["resource"]["url"] == app.url + "/ws/feed"
    assert "payment" in denied.headers["www-authenticate"].lower()

    credential = await fresh_credential(app.url + "/ws/feed", funded_payer(server), "x402")

    def paid_handshake() -> tuple[str, str]:
        with connect(ws_url(app), additional_headers=credential) as ws:
            assert ws.response is not None
            ws.send("paid")
            return ws.recv(), ws.response.headers["x-svc-receipt"]

    answer, receipt_id = await anyio.to_thread.run_sync(paid_handshake)
    assert answer == "echo paid"
    assert echo.entered == [receipt_id]
    # The same credential again is a replay: refused, and the app is not entered twice.
    replay = await anyio.to_thread.run_sync(
        lambda: refused_handshake(ws_url(app), additional_headers=credential)
    )
    assert replay.status_code == 402
    assert echo.entered == [receipt_id]

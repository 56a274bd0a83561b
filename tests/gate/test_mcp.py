"""MCP tools behind PaymentGate: an MCPServer app on uvicorn, a real reference server, and
the ``mcp`` package's own streamable-HTTP client (both the 2026 per-request protocol and
the legacy initialize handshake)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer

from svc_asgi import PAYMENT_REQUIRED_META_KEY, RECEIPT_META_KEY, PaymentGate, payment_of

from ..support import LiveApp, LiveServer, free_port
from .support import Shop, open_shop

MODES = ["auto", "legacy"]


def mcp_app() -> Any:
    server = MCPServer("archive")

    @server.tool()
    def search(query: str, ctx: Context) -> str:
        """Paid."""
        payment = payment_of(ctx.request_context.request)
        return f"results for {query} (paid with {payment.receipt_id if payment else None})"

    @server.tool()
    def ping() -> str:
        """Free."""
        return "pong"

    return server.streamable_http_app()


@pytest.fixture
def shop(server: LiveServer) -> Shop:
    return open_shop(server, kind="mcp", path=None, tool="search")


def mcp_gate(shop: Shop, service_url: str) -> PaymentGate:
    prices = {"mcp:search": shop.resource.id}
    return PaymentGate(
        mcp_app(), service_url=service_url, seller_key=shop.seller_key, prices=prices
    )


@pytest.fixture
def gated(server: LiveServer, shop: Shop, serve_app: Callable[..., LiveApp]) -> LiveApp:
    return serve_app(mcp_gate(shop, server.url))


async def _call(
    url: str, mode: str, tool: str, *, meta: dict[str, Any] | None = None, **headers: str
) -> Any:
    http = httpx2.AsyncClient(headers=headers)
    async with (
        http,
        Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode) as client,
    ):
        args = {"query": "owls"} if tool == "search" else {}
        return await client.call_tool(tool, args, meta=meta)


def call(url: str, mode: str, tool: str, **kwargs: Any) -> Any:
    return anyio.run(lambda: _call(url, mode, tool, **kwargs))


@pytest.mark.parametrize("mode", MODES)
def test_an_unpaid_call_is_a_tool_error_naming_what_to_pay(
    gated: LiveApp, shop: Shop, mode: str
) -> None:
    result = call(gated.url, mode, "search")
    assert result.is_error
    text = result.content[0].text
    resource = shop.resource
    for needle in (resource.id, "0.05 USD", resource.gate_url, resource.pay_url, RECEIPT_META_KEY):
        assert needle in text, (needle, text)
    details = result.meta[PAYMENT_REQUIRED_META_KEY]["error"]["details"]
    assert details["resource_id"] == resource.id and details["reason"] == "receipt_missing"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["meta", "header"])
def test_a_receipt_in_meta_or_a_header_unlocks_the_tool(
    gated: LiveApp, shop: Shop, mode: str, where: str
) -> None:
    receipt = shop.agent.pay(resource_id=shop.resource.id).receipt_id
    sent: dict[str, Any] = (
        {"meta": {RECEIPT_META_KEY: receipt}} if where == "meta" else {"X-Svc-Receipt": receipt}
    )
    result = call(gated.url, mode, "search", **sent)
    assert not result.is_error, result
    assert result.content[0].text == f"results for owls (paid with {receipt})"


@pytest.mark.parametrize("mode", MODES)
def test_free_tools_and_listing_pass(gated: LiveApp, mode: str) -> None:
    async def run() -> tuple[list[str], Any]:
        async with Client(gated.url + "/mcp", mode=mode) as client:
            tools = await client.list_tools()
            return [t.name for t in tools.tools], await client.call_tool("ping", {})

    names, pong = anyio.run(run)
    assert sorted(names) == ["ping", "search"]
    assert not pong.is_error and pong.content[0].text == "pong"


def test_a_receipt_for_another_resource_is_refused(
    server: LiveServer, gated: LiveApp, shop: Shop
) -> None:
    other = shop.seller.resources.create(kind="mcp", tool="other", amount="0.01")
    paid = shop.agent.pay(resource_id=other.id)
    result = call(gated.url, "auto", "search", meta={RECEIPT_META_KEY: paid.receipt_id})
    assert result.is_error
    assert "another resource" in result.content[0].text
    assert shop.resource.id in result.content[0].text
    bad = call(gated.url, "auto", "search", meta={RECEIPT_META_KEY: 42})
    assert bad.is_error and "Malformed receipt" in bad.content[0].text


# --- the wire, without the mcp client --------------------------------------------------------

_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Mcp-Protocol-Version": "2026-07-28",
}


def _tools_call(name: Any, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": name, "arguments": {"query": "x"}, **params},
    }
    if request_id is not None:
        message["id"] = request_id
    return message


def test_wire_answers(gated: LiveApp, shop: Shop) -> None:
    with httpx.Client(base_url=gated.url, headers=_HEADERS) as http:
        # A JSON answer respecting the request's id, marked for the 2026 protocol.
        r = http.post("/mcp", json=_tools_call("search", request_id="abc"))
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        body = r.json()
        assert body["id"] == "abc" and body["result"]["isError"] is True
        assert body["result"]["resultType"] == "complete"
        assert r.headers["cache-control"] == "no-store"

        # A client that accepts only SSE gets one SSE message event.
        r = http.post(
            "/mcp",
            json=_tools_call("search", request_id=7),
            headers={"Accept": "text/event-stream"},
        )
        assert r.headers["content-type"] == "text/event-stream"
        event = r.text.strip().splitlines()
        assert event[0] == "event: message"
        assert json.loads(event[1].removeprefix("data: "))["id"] == 7

        # A notification has no JSON-RPC answer: it is refused at the HTTP level.
        r = http.post("/mcp", json=_tools_call("search", request_id=None))
        assert r.status_code == 402 and r.json()["error"]["code"] == "payment_required"

        # A batch holding a paid call is refused, each request by its id.
        r = http.post("/mcp", json=[_tools_call("ping", 1), _tools_call("search", 2)])
        assert r.status_code == 400
        assert [e["id"] for e in r.json()] == [2]
        assert "batch" in r.json()[0]["error"]["message"]

        # What the gate cannot read unambiguously never reaches the server.
        r = http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"')
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        dup = b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        dup += b'"params":{"name":"ping","name":"search"}}'
        r = http.post("/mcp", content=dup)
        assert r.status_code == 400 and "duplicate" in r.json()["error"]["message"]
        r = http.post("/mcp", json=_tools_call(["search"]))
        assert r.status_code == 400 and r.json()["error"]["code"] == -32602
        r = http.post("/mcp", json=_tools_call("search", big="x" * (1024 * 1024 + 1)))
        assert r.status_code == 413


def test_service_down_is_a_jsonrpc_error(shop: Shop, serve_app: Callable[..., LiveApp]) -> None:
    app = serve_app(mcp_gate(shop, f"http://127.0.0.1:{free_port()}"))
    r = httpx.post(
        app.url + "/mcp",
        json=_tools_call("search", **{"_meta": {RECEIPT_META_KEY: "rcpt_x0000000000"}}),
        headers=_HEADERS,
    )
    assert r.status_code == 503
    error = r.json()["error"]
    assert (
        error["code"] == -32000 and error["data"]["error"]["code"] == "payment_service_unavailable"
    )


def test_a_deep_body_is_refused_where_a_library_raised_the_recursion_limit() -> None:
    """A seller's app that also imports x402 or pympp has py_ecc's limit of 100 000, at
    which the parser overflowed the C stack on a deep body and killed the app."""
    from svc_asgi._mcp import MAX_DEPTH, parse_body

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(ValueError, match="too deeply"):
            parse_body(b"[" * 200_000 + b"]" * 200_000)
        with pytest.raises(ValueError, match="too deeply"):
            parse_body(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
        assert parse_body(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) == _nested(MAX_DEPTH)
        # Brackets inside strings are text, not nesting.
        assert parse_body(json.dumps({"q": "[" * 1000}).encode()) == {"q": "[" * 1000}
    finally:
        sys.setrecursionlimit(limit)


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value

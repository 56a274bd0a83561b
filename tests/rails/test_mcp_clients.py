"""Paid MCP tools with the official clients (issue 14): x402's MCP client and pympp's MCP
client each pay a ``svc_asgi``-gated tool, charged once; a tool call that fails
(``isError``) is not charged; ``_meta["svc/receipt"]`` keeps working.  On loopback, the
official clients over the ``mcp`` package's streamable-HTTP client, against the sandbox."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import attrs
import httpx
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared import exceptions as mcp_exceptions
from mpp import Challenge
from mpp.extensions.mcp import MCPChallenge, McpClient, MCPCredential
from mpp.methods.evm import BASE_SEPOLIA_USDC
from mpp.methods.evm import client as mpp_evm_client
from x402.mcp import x402MCPClient

import svc
from svc_asgi import RECEIPT_META_KEY, PaymentGate, payment_of
from svc_asgi._mcp import find_tool_call, mpp_challenges, rail_credential_headers

from ..sandbox.helpers import assert_chain_sound
from ..support import LiveApp, LiveServer
from ..support import new_account as new_service_account
from .helpers import (
    PRICE,
    balance,
    event_data,
    events_of,
    funded_payer,
    receipts_of,
    x402_client,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _pympp_finds_mcp_error(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """pympp 0.16's MCP client imports ``McpError``, which the ``mcp`` package (2.x) now
    calls ``MCPError``: give it the name, nothing else changes."""
    monkeypatch.setattr(mcp_exceptions, "McpError", mcp_exceptions.MCPError, raising=False)
    yield


def mcp_app(calls: list[str]) -> Any:
    server = MCPServer("archive")

    @server.tool()
    def search(query: str, ctx: Context) -> str:
        """Paid, succeeds."""
        calls.append("search")
        payment = payment_of(ctx.request_context.request)
        return f"results for {query} (paid with {payment.receipt_id if payment else None})"

    @server.tool()
    def broken(query: str) -> str:
        """Paid, fails (an ``isError`` result)."""
        calls.append("broken")
        raise RuntimeError("the index is down")

    return server.streamable_http_app()


@attrs.frozen
class ToolShop:
    live: LiveServer
    seller: svc.Client
    owner_id: str
    resources: dict[str, svc.Resource]
    url: str
    calls: list[str]

    def balance(self) -> Decimal:
        return self.seller.sellers.balance().balance


def tool_shop(
    live: LiveServer, serve_app: Callable[..., LiveApp], *, mcp_challenge: str = "tool_result"
) -> ToolShop:
    account = new_service_account(live.url, "test")
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    resources = {
        tool: seller.resources.create(kind="mcp", tool=tool, amount="0.25")
        for tool in ("search", "broken")
    }
    seller.sellers.enable_payments()
    calls: list[str] = []
    app = PaymentGate(
        mcp_app(calls),
        prices={f"mcp:{tool}": resource.id for tool, resource in resources.items()},
        service_url=live.url,
        seller_key=account.seller_key,
        mcp_challenge=mcp_challenge,  # type: ignore[arg-type]
    )
    return ToolShop(
        live=live,
        seller=seller,
        owner_id=account.owner_id,
        resources=resources,
        url=serve_app(app).url + "/mcp",
        calls=calls,
    )


class McpSdkForX402:
    """x402's MCP client calls ``call_tool(params)`` and reads ``isError``, ``_meta`` and
    ``structuredContent`` off the result: this passes that on to the ``mcp`` package's
    client (the glue its README leaves to the caller), changing nothing."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call_tool(self, params: dict[str, Any], **kwargs: Any) -> Any:
        timeout = kwargs.get("read_timeout_seconds")
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        result = await self.client.call_tool(
            params["name"], params.get("arguments"), timeout, meta=params.get("_meta")
        )
        return SimpleNamespace(
            content=result.content,
            isError=result.is_error,
            structuredContent=result.structured_content,
            _meta=result.meta or {},
        )


async def x402_call(url: str, payer: Any, tool: str, mode: str = "auto") -> Any:
    async with Client(url, mode=mode) as client:
        paying = x402MCPClient(McpSdkForX402(client), x402_client(payer))
        return await paying.call_tool(tool, {"query": "owls"})


async def mpp_call(url: str, payer: Any, tool: str, mode: str = "auto") -> Any:
    charge = mpp_evm_client.charge(currency=BASE_SEPOLIA_USDC, account=payer)
    async with Client(url, mode=mode) as client:
        return await McpClient(client, methods=[charge]).call_tool(tool, {"query": "owls"})


def _charged_once(shop: ToolShop, payer: Any, tool: str) -> str:
    [receipt] = receipts_of(shop.live, shop.resources[tool].id)
    assert balance(shop.live.url, payer.address) == 1_000_000 - PRICE
    assert shop.balance() > 0
    assert len(events_of(shop.live, shop.owner_id, "payment.succeeded")) == 1
    assert events_of(shop.live, shop.owner_id, "payment.failed") == []
    assert_chain_sound(shop.live.ctx.db)
    return str(receipt.id)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_x402s_mcp_client_pays_a_tool(
    server: LiveServer, serve_app: Callable[..., LiveApp], mode: str
) -> None:
    shop = tool_shop(server, serve_app)
    payer = funded_payer(server)

    result = await x402_call(shop.url, payer, "search", mode)
    assert result.payment_made and not result.is_error, result.content
    receipt_id = _charged_once(shop, payer, "search")
    assert result.content[0].text == f"results for owls (paid with {receipt_id})"
    assert result.payment_response is not None and result.payment_response.success
    assert shop.calls == ["search"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_pympps_mcp_client_pays_a_tool(
    server: LiveServer, serve_app: Callable[..., LiveApp], mode: str
) -> None:
    shop = tool_shop(server, serve_app, mcp_challenge="jsonrpc_error")
    payer = funded_payer(server)

    result = await mpp_call(shop.url, payer, "search", mode)
    assert not result.is_error, result.content
    receipt_id = _charged_once(shop, payer, "search")
    assert result.content[0].text == f"results for owls (paid with {receipt_id})"
    assert result.receipt is not None and result.receipt.status == "success"
    assert result.meta[RECEIPT_META_KEY] == receipt_id
    assert shop.calls == ["search"]


async def test_a_failing_tool_call_is_not_charged(
    server: LiveServer, serve_app: Callable[..., LiveApp], protocol: str
) -> None:
    challenge = "tool_result" if protocol == "x402" else "jsonrpc_error"
    shop = tool_shop(server, serve_app, mcp_challenge=challenge)
    payer = funded_payer(server)

    call = x402_call if protocol == "x402" else mpp_call
    result = await call(shop.url, payer, "broken")
    assert result.is_error and "Error executing tool broken" in result.content[0].text
    assert shop.calls == ["broken"]
    assert balance(server.url, payer.address) == 1_000_000
    assert receipts_of(server, shop.resources["broken"].id) == []
    assert shop.balance() == Decimal("0")
    assert events_of(server, shop.owner_id, "payment.succeeded") == []
    [failed] = events_of(server, shop.owner_id, "payment.failed")
    data = event_data(failed, svc.PaymentFailedData)
    assert (data.rail, data.reason, data.payer) == (protocol, "answer_failed", payer.address)
    assert data.status is None and "error result" in (data.message or "")
    assert_chain_sound(server.ctx.db)


async def test_the_svc_receipt_still_unlocks_a_tool_with_open_rails_on(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = tool_shop(server, serve_app)
    async with Client(shop.url) as client:
        unpaid = await client.call_tool("search", {"query": "owls"})
    assert unpaid.is_error and shop.resources["search"].id in unpaid.content[0].text
    assert unpaid.structured_content is not None
    assert unpaid.structured_content["accepts"], unpaid.structured_content

    agents = new_service_account(server.url, "test")
    owner = svc.Client(
        base_url=server.url, owner_jwt=agents.owner_jwt, environment="test", max_retries=0
    )
    key = owner.wallet_keys.create(name="agent")
    owner.wallet_keys.fund(key.id, "10.00")
    agent = svc.Client(base_url=server.url, wallet_key=key.key, max_retries=0)
    paid = agent.pay(resource_id=shop.resources["search"].id)
    async with Client(shop.url) as client:
        result = await client.call_tool(
            "search", {"query": "owls"}, meta={RECEIPT_META_KEY: paid.receipt_id}
        )
    assert not result.is_error and paid.receipt_id in result.content[0].text


def test_the_mpp_credential_in_meta_is_the_authorization_pympp_would_send() -> None:
    """The gate turns pympp's MCP credential into the HTTP credential pympp itself would
    send (``Authorization: Payment``), and reads the challenges pympp's server issues."""
    core = Challenge(
        id="ch_1",
        method="evm",
        intent="charge",
        request={"amount": "250000", "currency": "0xabc", "recipient": "0xdef"},
        realm="shop.example",
        expires="2030-01-01T00:00:00Z",
        description='a "quoted" fee',
    )
    header = core.to_www_authenticate("shop.example")
    [challenge] = mpp_challenges([("WWW-Authenticate", header)])
    parsed = MCPChallenge.from_dict(challenge)
    assert parsed.to_dict() == challenge and parsed.description == 'a "quoted" fee'
    credential = MCPCredential(challenge=parsed, payload={"signature": "0x01"}, source="0x9")
    call = find_tool_call(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search", "_meta": credential.to_meta()},
        }
    )
    assert call is not None
    expected = credential.to_core().to_authorization()
    assert rail_credential_headers(call) == {"authorization": expected}


async def test_a_malformed_or_forged_credential_is_refused_in_mcp_terms(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = tool_shop(server, serve_app, mcp_challenge="jsonrpc_error")
    payer = funded_payer(server)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2026-07-28",
    }

    def tools_call(meta: dict[str, Any]) -> dict[str, Any]:
        params = {"name": "search", "arguments": {"query": "owls"}, "_meta": meta}
        return {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}

    async with httpx.AsyncClient(headers=headers) as http:
        bad = await http.post(shop.url, json=tools_call({"org.paymentauth/credential": "x"}))
        assert bad.status_code == 400 and bad.json()["error"]["code"] == -32602
        assert "Malformed payment credential" in bad.json()["error"]["message"]

        unpaid = await http.post(shop.url, json=tools_call({}))
        error = unpaid.json()["error"]
        assert error["code"] == -32042 and error["data"]["httpStatus"] == 402
        [challenge] = error["data"]["challenges"]

    result = await mpp_call(shop.url, payer, "search")
    assert not result.is_error
    # An unsigned credential on an issued challenge: refused with -32043 and a fresh
    # challenge, the tool never run, nothing more charged.
    replay = MCPCredential(challenge=MCPChallenge.from_dict(challenge), payload={"x": 1})
    async with httpx.AsyncClient(headers=headers) as http:
        refused = await http.post(shop.url, json=tools_call(replay.to_meta()))
    error = refused.json()["error"]
    assert error["code"] == -32043 and error["data"]["challenges"], error
    assert error["data"]["failure"]["reason"] in ("receipt_refused", "receipt_malformed")
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert shop.calls == ["search"]

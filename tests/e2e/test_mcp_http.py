"""The svc MCP tools over streamable HTTP at the reference server's ``/mcp``, driven by the
``mcp`` package's own client against the live server: one server for every caller, each
request's ``Authorization`` credential deciding who calls."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from svc import Client as SyncClient
from svc.mcp_server import TOOL_NAMES

from ..conftest import fresh_database
from ..payouts.helpers import FAST_PAYOUTS, complete_onboarding
from ..support import Account, LiveServer, new_account


@asynccontextmanager
async def _session(url: str, credential: str | None, **headers: str) -> AsyncIterator[Client]:
    """An MCP client session with the server at ``url`` (``/mcp``) as ``credential``."""
    if credential is not None:
        headers["Authorization"] = f"Bearer {credential}"
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        yield client


async def _tool(client: Client, tool: str, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise AssertionError(result.content[0].text)
    return json.loads(result.content[0].text)


async def _error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result
    text: str = result.content[0].text
    return text


def test_capabilities_and_llms_txt_name_the_endpoint(server: LiveServer) -> None:
    caps = httpx.get(server.url + "/agent/capabilities").json()
    assert caps["mcp_urls"] == [server.url + "/mcp"]
    assert f"{server.url}/mcp" in httpx.get(server.url + "/llms.txt").text


@pytest.mark.anyio
async def test_the_tools_are_the_specs(server: LiveServer, account: Account) -> None:
    async with _session(server.url, account.seller_key) as client:
        tools = (await client.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    assert {"svc_connect", "svc_withdraw"} <= {t.name for t in tools}
    # The request context the tools take is not a parameter a model sees.
    assert all("ctx" not in t.input_schema.get("properties", {}) for t in tools)


@pytest.fixture
def other_database(tmp_path: Path) -> Iterator[str]:
    """A second database, set up before (so dropped after) the suite's servers."""
    (tmp_path / "other").mkdir()
    with fresh_database(tmp_path / "other") as url:
        yield url


@pytest.mark.anyio
async def test_two_apps_in_one_process_each_serve_their_own_tool_calls(
    other_database: str,
    server: LiveServer,
    account: Account,
    make_server: Callable[..., LiveServer],
) -> None:
    """The apps of a process share one MCP server (the tools are built once), yet a tool
    call reaches the app its request came to: each database knows only its own key, so a
    call sent on to the other app would fail."""
    other = make_server(database_url=other_database)
    other_account = new_account(other.url)
    seen: dict[str, list[str]] = {server.url: [], other.url: []}

    async def ask(url: str, key: str) -> None:
        async with _session(url, key) as client:
            for _ in range(3):
                seen[url].append((await _tool(client, "svc_sellers", action="me"))["id"])

    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(ask, server.url, account.seller_key)
            tasks.start_soon(ask, other.url, other_account.seller_key)
    assert seen == {server.url: [account.seller_id] * 9, other.url: [other_account.seller_id] * 9}


@pytest.mark.anyio
async def test_each_credential_its_own_tools(server: LiveServer, account: Account) -> None:
    async with _session(server.url, account.seller_key) as seller:
        me = await _tool(seller, "svc_sellers", action="me")
        assert me["id"] == account.seller_id
        link = await _tool(seller, "svc_create_pay_link", amount="0.05", path="/v1/x")
        # URLs as the API gives them: the caller's host, not an in-process one.
        assert link["gate_url"].startswith(server.url + "/g/")
        assert link["pay_page_url"].startswith(server.url + "/buy/")
        # A seller key on an owner tool: the API's own refusal, as a tool error.
        refused = await _error(seller, "svc_sellers", action="list")
        assert "wrong_credential (403)" in refused and "request_id=req_" in refused

    async with _session(server.url, account.owner_jwt, **{"X-Svc-Environment": "test"}) as owner:
        listed = await _tool(owner, "svc_sellers", action="list")
        assert [s["id"] for s in listed["data"]] == [account.seller_id]
    with SyncClient(base_url=server.url, owner_jwt=account.owner_jwt, environment="test") as c:
        c.wallet_keys.fund(account.wallet_key_id, "1")

    async with _session(server.url, account.wallet_key) as agent:
        paid = await _tool(agent, "svc_pay", resource_id=link["resource_id"])
        assert paid["amount"] == "0.05" and paid["receipt_id"].startswith("rcpt_")


def test_without_a_valid_credential_the_endpoint_answers_401(server: LiveServer) -> None:
    """Refused by the service's pipeline before MCP runs: HTTP 401 in the envelope, which
    the client reports as a failed connection."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, code in (
        ({}, "unauthenticated"),
        ({"Authorization": "Bearer svc_sk_test_nope"}, "invalid_credential"),
        ({"Authorization": "Bearer not-a-jwt"}, "invalid_credential"),
        ({"Authorization": "Basic abc"}, "invalid_credential"),
    ):
        r = httpx.post(server.url + "/mcp", json=initialize, headers={**accept, **headers})
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == code
        assert r.json()["request_id"] == r.headers["x-request-id"]
    r = httpx.post(server.url + "/mcp", json={}, headers={**accept})
    assert "an owner JWT, a seller key" in r.json()["error"]["message"]
    acct = new_account(server.url)
    live = {"Authorization": f"Bearer {acct.seller_key}", "X-Svc-Environment": "live"}
    r = httpx.post(server.url + "/mcp", json=initialize, headers={**accept, **live})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "environment_mismatch")
    r = httpx.post(
        server.url + "/mcp",
        content=json.dumps(initialize),
        headers={
            **accept,
            "Authorization": f"Bearer {acct.seller_key}",
            "Content-Type": "text/plain",
        },
    )
    assert (r.status_code, r.json()["error"]["code"]) == (415, "unsupported_media_type")


@pytest.mark.anyio
async def test_the_mcp_client_without_a_credential_fails_to_connect(server: LiveServer) -> None:
    with pytest.raises(Exception):  # noqa: B017 - whatever the client raises for a 401
        async with _session(server.url, None) as client:
            await client.list_tools()


def test_the_endpoint_takes_the_pipelines_rules(server: LiveServer, account: Account) -> None:
    """Request ids and the rate limit's headers on what the MCP transport answers."""
    r = httpx.post(
        server.url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={
            "Authorization": f"Bearer {account.seller_key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"].startswith("req_")
    assert int(r.headers["x-ratelimit-limit"]) > 0
    assert {t["name"] for t in r.json()["result"]["tools"]} == set(TOOL_NAMES)


@pytest.mark.anyio
async def test_two_callers_at_once_see_only_their_own(server: LiveServer) -> None:
    a, b = new_account(server.url), new_account(server.url)
    seen: dict[str, list[str]] = {}

    async def caller(name: str, key: str) -> None:
        async with _session(server.url, key) as client:
            ids = []
            for i in range(5):
                created = await _tool(
                    client, "svc_resources", action="create", path=f"/{name}/{i}", amount="0.01"
                )
                ids.append(created["id"])
                me = await _tool(client, "svc_sellers", action="me")
                assert me["id"] == (a if name == "a" else b).seller_id
            listed = await _tool(client, "svc_resources", action="list", limit=100)
            seen[name] = [r["id"] for r in listed["data"]]
            assert sorted(seen[name]) == sorted(ids)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(caller, "a", a.seller_key)
        tasks.start_soon(caller, "b", b.seller_key)
    assert not set(seen["a"]) & set(seen["b"])


@pytest.mark.anyio
async def test_go_live_through_the_tools_alone(make_server: Callable[..., LiveServer]) -> None:
    """The spec's go-live order over ``/mcp``: the owner creates a seller and a webhook,
    the seller prices a resource and enables payments, an agent pays it, the seller's
    human onboards (the sandbox form, as a browser posts it) and the balance is
    withdrawn until paid."""
    fast = make_server(**FAST_PAYOUTS)
    acct = new_account(fast.url)
    test_env = {"X-Svc-Environment": "test"}

    async with _session(fast.url, acct.owner_jwt, **test_env) as owner:
        created = await _tool(owner, "svc_sellers", action="create", name="Go live")
        seller_key = created["seller_key"]
        hook = await _tool(
            owner,
            "svc_webhooks",
            action="create",
            url="http://127.0.0.1:9/hooks",
            events=["payment.succeeded"],
        )
        assert hook["signing_secret"].startswith("whsec_")

    async with _session(fast.url, seller_key) as seller:
        link = await _tool(seller, "svc_create_pay_link", amount="10.00", path="/report")
        enabled = await _tool(seller, "svc_enable_payments")
        assert enabled["mpp_enabled"] is True

    with SyncClient(base_url=fast.url, owner_jwt=acct.owner_jwt, environment="test") as c:
        assert hook["id"] in [h.id for h in c.webhooks.list().data]  # in test, as asked
        c.wallet_keys.fund(acct.wallet_key_id, "20")
    async with _session(fast.url, acct.wallet_key) as agent:
        paid = await _tool(agent, "svc_pay", resource_id=link["resource_id"])
        assert paid["receipt_id"].startswith("rcpt_")

    async with _session(fast.url, seller_key) as seller:
        balance = await _tool(seller, "svc_sellers", action="balance")
        assert balance["balance"] == "9.90"
        onboard = await _tool(seller, "svc_connect", action="onboard", country="US")
        assert "human" in onboard["next_step"]
        assert complete_onboarding(onboard["onboard_url"]).status_code == 200
        synced = await _tool(seller, "svc_connect", action="sync")
        assert synced["payouts_enabled"] is True
        w = await _tool(seller, "svc_withdraw")
        assert (w["status"], w["amount"]) == ("pending", "9.90")
        deadline = time.monotonic() + 15
        while w["status"] not in ("paid", "failed"):
            assert time.monotonic() < deadline, w
            await anyio.sleep(0.05)
            w = await _tool(seller, "svc_withdraw", withdrawal_id=w["id"])
        assert w["status"] == "paid"

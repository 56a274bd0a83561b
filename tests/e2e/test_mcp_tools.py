"""The svc MCP tools against a real server, driven by the ``mcp`` package's own client
(in process): the seller go-live flow and an agent paying, as a model would call them."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from svc import Client as SyncClient
from svc.mcp_server import TOOL_NAMES, create_server

from ..money.helpers import market
from ..payouts.helpers import FAST_PAYOUTS, complete_onboarding, shop
from ..support import Account, LiveServer, new_account
from .test_cli_svc import METERED

pytestmark = pytest.mark.anyio


async def _tool(options: dict[str, Any], name: str, **args: Any) -> Any:
    async with Client(create_server(client_options=options)) as client:
        result = await client.call_tool(name, args)
    if result.is_error:
        raise AssertionError(result.content[0].text)
    return json.loads(result.content[0].text)


async def _error(options: dict[str, Any], name: str, **args: Any) -> str:
    async with Client(create_server(client_options=options)) as client:
        result = await client.call_tool(name, args)
    assert result.is_error, result
    text: str = result.content[0].text
    return text


async def test_the_tools_are_the_specs() -> None:
    async with Client(create_server(client_options={"base_url": "http://127.0.0.1:9"})) as c:
        listed = await c.list_tools()
    assert sorted(t.name for t in listed.tools) == sorted(TOOL_NAMES)
    assert all(t.description for t in listed.tools)


async def test_seller_go_live_and_agent_pay_through_the_tools(
    server: LiveServer, account: Account
) -> None:
    owner = {"base_url": server.url, "owner_jwt": account.owner_jwt, "environment": "test"}
    seller = {"base_url": server.url, "seller_key": account.seller_key}
    agent = {"base_url": server.url, "wallet_key": account.wallet_key}

    listed = await _tool(owner, "svc_sellers", action="list")
    assert [s["id"] for s in listed["data"]] == [account.seller_id]

    link = await _tool(seller, "svc_create_pay_link", amount="0.05", path="/v1/report")
    assert link["gate_url"].startswith(server.url + "/g/")
    assert link["pay_url"].startswith(server.url + "/buy/")
    # pay_url everywhere; pay_page_url beside it because the spec's tool table names it so
    assert set(link) == {"resource_id", "gate_url", "pay_url", "pay_page_url"}
    assert link["pay_page_url"] == link["pay_url"]
    again = await _tool(seller, "svc_create_pay_link", amount="0", resource_id=link["resource_id"])
    assert again == link

    updated = await _tool(
        seller, "svc_resources", action="update", resource_id=link["resource_id"], amount="0.07"
    )
    assert updated["amount"] == "0.07"
    enabled = await _tool(seller, "svc_enable_payments")
    assert enabled["mpp_enabled"] is True and enabled["x402_enabled"] is True

    hook = await _tool(
        {"base_url": server.url},
        "svc_webhooks",
        action="create",
        url="http://localhost:9/hooks",
        events=["payment.succeeded"],
        owner_jwt=account.owner_jwt,
        environment="test",
    )
    assert hook["signing_secret"].startswith("whsec_")

    with SyncClient(**owner) as c:
        c.wallet_keys.fund(account.wallet_key_id, "1")
    paid = await _tool(agent, "svc_pay", resource_id=link["resource_id"])
    assert paid["amount"] == "0.07" and paid["receipt_id"].startswith("rcpt_")

    balance = await _tool(seller, "svc_sellers", action="balance")
    assert balance["balance"] == "0.0693"  # 0.07 less the 1% platform fee

    sample = await _tool(
        {"base_url": server.url},
        "svc_webhooks",
        action="test",
        webhook_id=hook["id"],
        owner_jwt=account.owner_jwt,
        environment="test",
    )
    assert sample["event_type"] == "payment.succeeded" and sample["webhook_id"] == hook["id"]

    recycled = await _tool(owner, "svc_recycle", seller_id=account.seller_id)
    assert (recycled["amount"], recycled["seller_balance"]) == ("0.0693", "0.00")


async def test_refusals_are_tool_errors_with_code_and_request_id(server: LiveServer) -> None:
    text = await _error(
        {"base_url": server.url, "seller_key": "svc_sk_test_nope"}, "svc_sellers", action="me"
    )
    assert "invalid_credential (401)" in text and "request_id=req_" in text
    acct = new_account(server.url)
    agent = {"base_url": server.url, "wallet_key": acct.wallet_key}
    text = await _error(agent, "svc_pay", destination="@nobody")
    assert "needs amount" in text
    text = await _error(
        {"base_url": server.url, "seller_key": acct.seller_key}, "svc_resources", action="get"
    )
    assert "needs resource_id" in text


async def test_the_stdio_server_an_mcp_host_launches(server: LiveServer, account: Account) -> None:
    """What Claude Desktop or an IDE does: start ``python -m svc.mcp_server`` with the
    credentials in its environment and call a tool over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "svc.mcp_server"],
        env={**os.environ, "SVC_BASE_URL": server.url, "SVC_SELLER_KEY": account.seller_key},
    )
    async with Client(params) as client:
        result = await client.call_tool("svc_sellers", {"action": "me"})
    assert not result.is_error, result
    assert json.loads(result.content[0].text)["id"] == account.seller_id


async def test_an_agent_pays_a_gate_with_svc_pay_url(server: LiveServer, account: Account) -> None:
    """The agent-side tool: pay a hosted gate on an open rail and get the unlocked answer."""
    seller = {"base_url": server.url, "seller_key": account.seller_key}
    link = await _tool(seller, "svc_create_pay_link", amount="0.10", path="/v1/report")
    await _tool(seller, "svc_enable_payments")
    with SyncClient(base_url=server.url, owner_jwt=account.owner_jwt, environment="test") as c:
        c.wallet_keys.fund(account.wallet_key_id, "1")

    agent = {"base_url": server.url, "wallet_key": account.wallet_key}
    paid = await _tool(agent, "svc_pay_url", url=link["gate_url"])

    assert paid["rail"] in ("x402", "mpp") and paid["tx_hash"].startswith("0x")
    unlocked = json.loads(paid["body"])
    assert unlocked["paid"] is True and unlocked["resource"]["id"] == link["resource_id"]
    balance = await _tool(seller, "svc_sellers", action="balance")
    assert balance["balance"] == "0.099"
    text = await _error(agent, "svc_pay_url", url=server.url + "/health")
    assert "not_payable" in text and "request_id=req_" in text


async def test_list_actions_page(server: LiveServer, account: Account) -> None:
    """The tools' list actions take the one paging contract's ``limit``/``starting_after``."""
    owner = {"base_url": server.url, "owner_jwt": account.owner_jwt, "environment": "test"}
    with SyncClient(**owner) as c:
        for name in ("b", "c"):
            c.sellers.create(name)
    first = await _tool(owner, "svc_sellers", action="list", limit=2)
    assert len(first["data"]) == 2 and first["has_more"] is True
    rest = await _tool(
        owner, "svc_sellers", action="list", limit=2, starting_after=first["data"][-1]["id"]
    )
    assert [s["name"] for s in rest["data"]] == ["c"] and rest["has_more"] is False
    text = await _error(owner, "svc_sellers", action="list", starting_after="sel_unknown")
    assert "validation_error" in text


async def test_connect_and_withdraw_through_the_tools(
    make_server: Callable[..., LiveServer],
) -> None:
    """svc_connect hands the onboarding link to a human (here the sandbox form, posted as
    a browser would), syncs, and svc_withdraw moves the balance out and reports its
    status until it is paid."""
    fast = make_server(**FAST_PAYOUTS)
    s = shop(fast)
    seller = {"base_url": fast.url, "seller_key": s.acct.seller_key}
    assert (await _tool(seller, "svc_connect", action="status"))["status"] == "not_started"
    assert "needs country" in await _error(seller, "svc_connect", action="onboard")
    refused = await _error(seller, "svc_withdraw")
    assert "payouts_not_enabled" in refused and "GET /sellers/me/balance" in refused

    link = await _tool(seller, "svc_connect", action="onboard", country="US")
    assert link["onboard_url"].startswith(fast.url) and link["expires_at"]
    assert "human" in link["next_step"] and "action=sync" in link["next_step"]
    assert complete_onboarding(link["onboard_url"]).status_code == 200
    synced = await _tool(seller, "svc_connect", action="sync")
    assert synced["payouts_enabled"] is True and synced["requirements_due"] == []
    login = await _tool(seller, "svc_connect", action="login")
    assert login["login_url"].startswith(fast.url) and "human" in login["next_step"]

    w = await _tool(seller, "svc_withdraw", amount="5.00")
    assert (w["status"], w["amount"]) == ("pending", "5.00")
    deadline = time.monotonic() + 15
    while w["status"] not in ("paid", "failed"):
        assert time.monotonic() < deadline, w
        await anyio.sleep(0.05)
        w = await _tool(seller, "svc_withdraw", withdrawal_id=w["id"])
    assert w["status"] == "paid"
    both = await _error(seller, "svc_withdraw", amount="1", withdrawal_id=w["id"])
    assert "not both" in both


async def test_the_tool_descriptions_say_a_human_onboards() -> None:
    async with Client(create_server(client_options={"base_url": "http://127.0.0.1:9"})) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert "HUMAN" in (tools["svc_connect"].description or "")
    assert "in_transit" in (tools["svc_withdraw"].description or "")


def test_building_the_tools_leaves_the_host_processs_logging_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mcp package's server configures the root logger (``basicConfig``: INFO, a rich
    handler) when built; inside the reference server that printed a line per httpx
    request.  A process that has configured no logging yet must stay that way."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as a fresh process has (pytest adds its own)
    monkeypatch.setattr(root, "level", logging.WARNING)
    create_server()
    assert root.handlers == [] and root.level == logging.WARNING


async def test_a_metered_receipt_read_and_captured_through_the_tools(server: LiveServer) -> None:
    m = market(server)
    metered = m.seller.resources.create(kind="http", path="/v1/chat", **METERED)
    paid = m.agent.pay(resource_id=metered.id)
    agent = {"base_url": server.url, "wallet_key": m.wallet_key}
    seller = {"base_url": server.url, "seller_key": m.seller_key}
    held = await _tool(agent, "svc_receipts", action="get", receipt_id=paid.receipt_id)
    assert (held["status"], held["amount"]) == ("authorized", "0.50")
    text = await _error(seller, "svc_receipts", action="capture", receipt_id=paid.receipt_id)
    assert "needs units" in text
    captured = await _tool(
        seller, "svc_receipts", action="capture", receipt_id=paid.receipt_id, units=137
    )
    assert (captured["status"], captured["amount"], captured["units"]) == ("settled", "0.0137", 137)
    read = await _tool(agent, "svc_receipts", action="get", receipt_id=paid.receipt_id)
    assert (read["status"], read["amount"]) == ("settled", "0.0137")
    text = await _error(
        seller, "svc_receipts", action="capture", receipt_id=paid.receipt_id, units=1
    )
    assert "(409)" in text and "request_id=req_" in text


async def test_a_payment_refunded_and_its_status_read_through_the_tools(
    server: LiveServer,
) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    agent = {"base_url": server.url, "wallet_key": m.wallet_key}
    seller = {"base_url": server.url, "seller_key": m.seller_key}
    settled = await _tool(agent, "svc_payment_status", receipt_id=paid.receipt_id)
    assert (settled["state"], settled["remaining"]) == ("settled", "1.00")
    text = await _error(agent, "svc_refund", receipt_id=paid.receipt_id)
    assert "SVC_SELLER_KEY" in text, text  # a seller's action
    part = await _tool(seller, "svc_refund", receipt_id=paid.receipt_id, amount="0.40")
    assert (part["amount"], part["status"]) == ("0.40", "succeeded")
    rest = await _tool(seller, "svc_refund", receipt_id=paid.receipt_id, reason="duplicate")
    assert (rest["amount"], rest["reason"]) == ("0.60", "duplicate")
    for who in (agent, seller):
        state = await _tool(who, "svc_payment_status", receipt_id=paid.receipt_id)
        assert (state["state"], state["refunded"], state["remaining"]) == (
            "refunded",
            "1.00",
            "0.00",
        )
    text = await _error(seller, "svc_refund", receipt_id=paid.receipt_id, amount="0.01")
    assert "refund_exceeds_payment (409)" in text and "request_id=req_" in text
    text = await _error(seller, "svc_payment_status", receipt_id="rcpt_nothing")
    assert "not_found (404)" in text

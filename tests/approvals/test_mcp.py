"""The svc MCP server's ``svc_pay_url`` tool: a payment that waits for a person is not
an error; the result carries the ``approval_url`` for the host to show and the
``idempotency_key`` to call again with, which then pays once."""

from __future__ import annotations

import json

import pytest
from anyio import to_thread
from mcp import Client

from svc.mcp_server import create_server

from ..payurl.helpers import make_agent
from ..support import LiveServer
from .helpers import PaidCounter, decide

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.anyio
async def test_the_tool_returns_the_link_then_pays_on_the_repeat(
    server: LiveServer, seller: PaidCounter
) -> None:
    agent = make_agent(server, approval_above="0.10")
    options = {"base_url": server.url, "wallet_key": agent.wallet_key}
    async with Client(create_server(client_options=options)) as client:
        first = await client.call_tool("svc_pay_url", {"url": seller.url})
        assert not first.is_error, first
        waiting = json.loads(first.content[0].text)
        assert waiting["approval_required"] is True and waiting["status"] == "pending"
        assert waiting["approval_url"] in waiting["message"] and seller.paid == 0
        await to_thread.run_sync(decide, waiting["approval_url"], "approve")
        again = {"url": seller.url, "idempotency_key": waiting["idempotency_key"]}
        paid = json.loads((await client.call_tool("svc_pay_url", again)).content[0].text)
    assert paid["amount"] == "0.25" and seller.paid == 1

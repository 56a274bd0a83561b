"""``POST /spend/pay-url`` with ``dry_run`` (issue 14, item 4): the URL is probed, and the
answer says the rail and price pay-url would pay and whether the wallet key's policy
allows it -- and if not, which rule blocks it, with its numbers.  Nothing is paid,
reserved or recorded: no attempt, no ledger row, no event, nothing on the chain."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from mcp import Client
from sqlalchemy import func, select

import svc
from reference_server.store import tables as t
from svc.cli import _build
from svc.mcp_server import create_server

from ..sandbox.helpers import serve
from ..support import LiveServer
from .apps import Counting, free_app, x402_gated_app
from .helpers import Agent, chain_balance, hot_address, make_agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _rows(server: LiveServer) -> dict[str, int]:
    counted = {
        "attempts": t.spend_attempts,
        "transfers": t.ledger_transfers,
        "events": t.events,
        "chain": t.sandbox_transactions,
    }
    with server.ctx.db.read() as conn:
        return {
            name: conn.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in counted.items()
        }


def _quote(agent: Agent, url: str, **body: Any) -> dict[str, Any]:
    r = agent.pay_url(url, dry_run=True, **body)
    assert r.status_code == 200, r.text
    quote: dict[str, Any] = r.json()
    assert quote["ok"] is True and quote["dry_run"] is True
    assert quote["request_id"] == r.headers["x-request-id"]
    return quote


def _nothing_happened(server: LiveServer, agent: Agent, before: dict[str, int]) -> None:
    assert _rows(server) == before
    state = agent.spend()
    assert state.spent_total == Decimal("0")
    assert agent.client.spend.attempts().data == []


def test_a_dry_run_quotes_the_offer_and_pays_nothing(
    server: LiveServer, agent: Agent, x402_url: str, pay_to: str
) -> None:
    before = _rows(server)
    quote = _quote(agent, x402_url)
    assert (quote["allowed"], quote["blocked_by"]) == (True, None)
    assert (quote["rail"], quote["amount"], quote["network"]) == ("x402", "0.25", "eip155:84532")
    assert quote["pay_to"].lower() == pay_to.lower()
    assert quote["url"] == x402_url and quote["host"] == x402_url.split("/")[2]
    _nothing_happened(server, agent, before)
    assert agent.spend().balance == Decimal("10.00")
    assert chain_balance(server, pay_to) == 0 and chain_balance(server, hot_address(server)) == 0
    # and paying it afterwards works as ever
    assert agent.client.spend.pay_url(x402_url).amount == Decimal("0.25")


@pytest.mark.parametrize(
    ("policy", "code", "numbers"),
    [
        ({"max_per_tx": "0.10"}, "max_per_tx_exceeded", {"max_per_tx": "0.10", "amount": "0.25"}),
        ({"budget": "0.20"}, "budget_exceeded", {"budget": "0.20", "remaining_budget": "0.20"}),
        (
            {"allowance": "0.20", "period": "day"},
            "allowance_exceeded",
            {"allowance": "0.20", "remaining_allowance": "0.20"},
        ),
        ({"allowed_rails": ["mpp"]}, "rail_not_allowed", {"rail": "x402"}),
        ({"fund": "0.10"}, "insufficient_funds", {"available": "0.10", "amount": "0.25"}),
    ],
)
def test_a_dry_run_names_the_rule_that_blocks_it(
    server: LiveServer, x402_url: str, policy: dict[str, Any], code: str, numbers: dict[str, Any]
) -> None:
    agent = make_agent(server, **policy)
    before = _rows(server)
    quote = _quote(agent, x402_url)
    assert quote["allowed"] is False and (quote["rail"], quote["amount"]) == ("x402", "0.25")
    blocked = quote["blocked_by"]
    assert blocked["code"] == code and blocked["message"]
    assert numbers.items() <= blocked["details"].items(), blocked
    if code == "allowance_exceeded":
        assert blocked["details"]["next_reset_at"] is not None
        assert "wait for the reset at" in blocked["message"]
    _nothing_happened(server, agent, before)


def test_a_dry_run_counts_what_was_already_spent(server: LiveServer, x402_url: str) -> None:
    agent = make_agent(server, allowance="0.30", period="week")
    assert _quote(agent, x402_url)["allowed"] is True
    agent.client.spend.pay_url(x402_url)
    blocked = _quote(agent, x402_url)["blocked_by"]
    assert blocked["code"] == "allowance_exceeded"
    assert blocked["details"]["remaining_allowance"] == "0.05"


def test_a_dry_run_does_not_contact_a_host_the_key_may_not_pay(
    server: LiveServer, facilitator: str, pay_to: str
) -> None:
    agent = make_agent(server, allowed_hosts=["api.example.com"])
    app = Counting(x402_gated_app(facilitator, pay_to))
    before = _rows(server)
    with serve(app) as url:
        quote = _quote(agent, url + "/report")
    assert app.requests == []
    assert quote["allowed"] is False and quote["rail"] is None and quote["amount"] is None
    assert quote["blocked_by"]["code"] == "host_not_allowed"
    assert quote["blocked_by"]["details"]["allowed_hosts"] == ["api.example.com"]
    _nothing_happened(server, agent, before)


def test_a_dry_run_of_a_url_that_cannot_be_paid_is_the_same_error(
    server: LiveServer, agent: Agent
) -> None:
    before = _rows(server)
    with serve(free_app()) as url:
        r = agent.pay_url(url + "/free", dry_run=True)
    assert r.status_code == 422 and r.json()["error"]["code"] == "not_payable"
    details = r.json()["error"]["details"]
    assert details["upstream_status"] == 200 and "attempt_id" not in details
    _nothing_happened(server, agent, before)


def test_a_dry_run_records_no_idempotency_key(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    """A dry run and the payment after it may share a key: the dry run recorded nothing."""
    assert _quote(agent, x402_url)["allowed"] is True
    r = agent.pay_url(x402_url, key="same-key", dry_run=True)
    assert r.status_code == 200 and "idempotent-replayed" not in r.headers
    paid = agent.pay_url(x402_url, key="same-key")
    assert paid.status_code == 200 and paid.json()["status"] == "succeeded"
    again = agent.pay_url(x402_url, key="same-key", dry_run=False)
    assert again.headers["idempotent-replayed"] == "true"


def test_the_sdk_quotes(server: LiveServer, x402_url: str) -> None:
    agent = make_agent(server, max_per_tx="0.10")
    quote = agent.client.spend.pay_url_quote(x402_url)
    assert isinstance(quote, svc.PayUrlQuote)
    assert (quote.allowed, quote.rail, quote.amount) == (False, "x402", Decimal("0.25"))
    assert quote.blocked_by is not None and quote.blocked_by.code == "max_per_tx_exceeded"
    assert agent.client.spend.attempts().data == []


@pytest.mark.anyio
async def test_the_async_sdk_quotes(server: LiveServer, agent: Agent, x402_url: str) -> None:
    async with svc.AsyncClient(base_url=server.url, wallet_key=agent.wallet_key) as client:
        quote = await client.spend.pay_url_quote(x402_url)
    assert quote.allowed is True and quote.amount == Decimal("0.25")


def test_the_cli_quotes(server: LiveServer, agent: Agent, x402_url: str) -> None:
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", x402_url]
    result = CliRunner().invoke(_build(), [*args, "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    quote = json.loads(result.output)
    assert (quote["dry_run"], quote["allowed"], quote["amount"]) == (True, True, "0.25")
    assert agent.client.spend.attempts().data == []


@pytest.mark.anyio
async def test_the_mcp_tool_quotes(server: LiveServer, x402_url: str) -> None:
    agent = make_agent(server, budget="0.20")
    options = {"base_url": server.url, "wallet_key": agent.wallet_key}
    async with Client(create_server(client_options=options)) as client:
        result = await client.call_tool("svc_pay_url", {"url": x402_url, "dry_run": True})
    assert not result.is_error, result
    quote = json.loads(result.content[0].text)
    assert quote["allowed"] is False and quote["blocked_by"]["code"] == "budget_exceeded"
    assert quote["blocked_by"]["details"]["remaining_budget"] == "0.20"
    assert agent.client.spend.attempts().data == []


def test_dry_run_must_be_a_boolean(server: LiveServer, agent: Agent) -> None:
    r = httpx.post(
        server.url + "/spend/pay-url",
        json={"url": "http://example.com/x", "dry_run": "yes"},
        headers={"Authorization": f"Bearer {agent.wallet_key}"},
    )
    assert r.status_code == 422
    assert [e["field"] for e in r.json()["error"]["details"]["errors"]] == ["dry_run"]

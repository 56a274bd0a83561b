"""Every way pay-url refuses: a clear error with request_id and the attempt id, a failed
attempt on record, ``payment.failed`` where a payment was attempted, and nothing paid --
on the chain and in the ledger."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference_server.store import tables as t

from ..sandbox.helpers import serve
from ..support import LiveServer, free_port, new_account
from .apps import Counting, another_network_app, free_app, gated_app, x402_gated_app
from .helpers import Agent, attempt_row, chain_balance, events, hot_address, make_agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def refused(r: Any, status: int, code: str) -> dict[str, Any]:
    """The envelope of a refusal, checked; its details."""
    assert r.status_code == status, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == code, body
    assert body["request_id"] == r.headers["x-request-id"]
    details: dict[str, Any] = body["error"]["details"]
    assert details["attempt_id"].startswith("att_")
    return details


def nothing_spent(agent: Agent) -> None:
    state = agent.spend()
    assert state.balance == Decimal("10.00") and state.spent_total == Decimal("0")


def test_a_url_that_does_not_ask_for_payment_is_not_payable(
    server: LiveServer, agent: Agent
) -> None:
    with serve(free_app()) as url:
        r = agent.pay_url(url + "/free")
    details = refused(r, 422, "not_payable")
    assert details["upstream_status"] == 200
    row = attempt_row(server, details["attempt_id"])
    assert (row.status, row.error_code, row.response_status) == ("failed", "not_payable", 200)
    nothing_spent(agent)
    assert events(server, agent.owner_id, "payment.failed") == []


def test_a_challenge_on_another_network_is_unsupported(
    server: LiveServer, agent: Agent, pay_to: str
) -> None:
    with serve(another_network_app(pay_to)) as url:
        r = agent.pay_url(url + "/mainnet")
    details = refused(r, 422, "unsupported_challenge")
    assert details["network"] == "eip155:84532"
    assert "eip155:84532" in r.json()["error"]["message"]
    assert attempt_row(server, details["attempt_id"]).status == "failed"
    nothing_spent(agent)


def test_a_host_outside_allowed_hosts_is_never_contacted(
    server: LiveServer, facilitator: str, pay_to: str
) -> None:
    agent = make_agent(server, allowed_hosts=["api.example.com"])
    app = Counting(x402_gated_app(facilitator, pay_to))
    with serve(app) as url:
        r = agent.pay_url(url + "/report")
    details = refused(r, 402, "host_not_allowed")
    assert details["allowed_hosts"] == ["api.example.com"]
    assert app.requests == []
    [failed] = events(server, agent.owner_id, "payment.failed")
    assert (failed["reason"], failed["attempt_id"], failed["type"]) == (
        "host_not_allowed",
        details["attempt_id"],
        "url",
    )
    nothing_spent(agent)


def test_allowed_hosts_name_the_host_with_its_port(
    server: LiveServer, facilitator: str, pay_to: str
) -> None:
    with serve(x402_gated_app(facilitator, pay_to)) as url:
        agent = make_agent(server, allowed_hosts=[url.removeprefix("http://")])
        r = agent.pay_url(url + "/report")
    assert r.status_code == 200, r.text


def test_a_rail_the_policy_does_not_allow_is_refused(
    server: LiveServer, x402_url: str, pay_to: str
) -> None:
    agent = make_agent(server, allowed_rails=["mpp"])
    details = refused(agent.pay_url(x402_url), 402, "rail_not_allowed")
    assert details["rail"] == "x402"
    [failed] = events(server, agent.owner_id, "payment.failed")
    assert (failed["rail"], failed["amount"]) == ("x402", "0.25")
    assert chain_balance(server, pay_to) == 0
    nothing_spent(agent)


def test_over_max_per_tx_is_refused_with_its_remedy(
    server: LiveServer, x402_url: str, pay_to: str
) -> None:
    agent = make_agent(server, max_per_tx="0.10")
    r = agent.pay_url(x402_url)
    details = refused(r, 402, "max_per_tx_exceeded")
    assert details["max_per_tx"] == "0.10" and "higher max_per_tx" in r.json()["error"]["message"]
    row = attempt_row(server, details["attempt_id"])
    assert (row.status, row.rail, row.amount_micros, row.transfer_id) == (
        "failed",
        "x402",
        250_000,
        None,
    )
    assert chain_balance(server, pay_to) == 0
    nothing_spent(agent)


def test_insufficient_funds_is_refused(server: LiveServer, x402_url: str, pay_to: str) -> None:
    agent = make_agent(server, fund="0.10")
    refused(agent.pay_url(x402_url), 402, "insufficient_funds")
    assert chain_balance(server, pay_to) == 0
    assert agent.spend().spent_total == Decimal("0")


def test_an_upstream_that_takes_the_payment_but_does_not_settle_is_voided(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str
) -> None:
    async def broken(request: Request) -> Response:
        return JSONResponse({"error": "the goods are gone"}, status_code=500)

    app = Counting(gated_app(facilitator, pay_to, broken))
    with serve(app) as url:
        r = agent.pay_url(url + "/paid")
    details = refused(r, 502, "upstream_failed")
    assert details["upstream_status"] == 500
    assert len(app.requests) == 2  # the probe and the paid request
    row = attempt_row(server, details["attempt_id"])
    assert (row.status, row.error_code, row.response_status) == ("failed", "upstream_failed", 500)
    # The reservation was voided and the charge refunded: the key is as it was.
    nothing_spent(agent)
    assert agent.spend().remaining_allowance is None
    transfers = t.ledger_transfers
    with server.ctx.db.read() as conn:
        status = conn.execute(
            select(transfers.c.status).where(transfers.c.id == row.transfer_id)
        ).scalar_one()
        cancelled = conn.execute(
            select(t.sandbox_transactions.c.kind).where(t.sandbox_transactions.c.nonce == row.nonce)
        ).scalar_one()
    assert (status, cancelled) == ("voided", "cancelAuthorization")
    # The authorization it was sent can never settle now.
    assert chain_balance(server, pay_to) == 0
    assert row.payer == hot_address(server).lower() or row.payer == hot_address(server)
    [failed] = events(server, agent.owner_id, "payment.failed")
    assert (failed["reason"], failed["attempt_id"], failed["amount"], failed["settlement"]) == (
        "upstream_failed",
        row.id,
        "0.25",
        "external",
    )


def test_a_url_the_ssrf_rules_refuse_is_not_allowed(server: LiveServer, agent: Agent) -> None:
    details = refused(agent.pay_url("http://user:secret@127.0.0.1:9/paid"), 422, "url_not_allowed")
    assert attempt_row(server, details["attempt_id"]).error_code == "url_not_allowed"
    nothing_spent(agent)


def test_an_unreachable_url_is_upstream_unavailable(server: LiveServer, agent: Agent) -> None:
    details = refused(
        agent.pay_url(f"http://127.0.0.1:{free_port()}/x"), 502, "upstream_unavailable"
    )
    assert attempt_row(server, details["attempt_id"]).status == "failed"
    nothing_spent(agent)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": None}, "url"),
        ({"url": 7}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://example.com/x", "method": "PUT"}, "method"),
        ({"url": "http://example.com/x", "json": {"q": 1}}, "json"),
        ({"url": "http://example.com/x", "extra": 1}, "extra"),
    ],
)
def test_bad_requests_are_refused_before_any_attempt(
    server: LiveServer, agent: Agent, body: dict[str, Any], field: str
) -> None:
    r = httpx.post(
        server.url + "/spend/pay-url",
        json=body,
        headers={"Authorization": f"Bearer {agent.wallet_key}"},
    )
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["error"]["details"]["errors"]] == [field]
    assert agent.client.spend.attempts().data == []


def test_pay_url_needs_a_wallet_key(server: LiveServer, agent: Agent) -> None:
    r = httpx.post(server.url + "/spend/pay-url", json={"url": "http://example.com/x"})
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthenticated")
    seller = new_account(server.url).seller_key
    r = httpx.post(
        server.url + "/spend/pay-url",
        json={"url": "http://example.com/x"},
        headers={"Authorization": f"Bearer {seller}"},
    )
    assert (r.status_code, r.json()["error"]["code"]) == (403, "wrong_credential")
    assert "x-ratelimit-limit" in r.headers


@pytest.mark.parametrize(
    "raw",
    [
        b"[1]",
        b'{"url": "http://example.com/x", "json": ' + b"[" * 40 + b"]" * 40 + b"}",
        b"{not json",
    ],
)
def test_bodies_the_api_refuses_are_refused_here_too(
    server: LiveServer, agent: Agent, raw: bytes
) -> None:
    r = httpx.post(
        server.url + "/spend/pay-url",
        content=raw,
        headers={"Authorization": f"Bearer {agent.wallet_key}", "Content-Type": "application/json"},
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_json")
    assert r.json()["request_id"] == r.headers["x-request-id"]


@pytest.mark.parametrize("dry_run", [None, True])
def test_refusals_come_in_the_pipelines_order(
    server: LiveServer, agent: Agent, dry_run: bool | None
) -> None:
    """pay-url authenticates in the transaction that begins its attempt (or, for a dry
    run, reads its key): a refused request is still refused for its credential first,
    then its Idempotency-Key, then its body, and leaves no attempt behind."""
    url = server.url + "/spend/pay-url"
    bad = {"url": "not a url", "method": "PUT"}
    if dry_run is not None:
        bad["dry_run"] = dry_run

    def refused(body: Any, **headers: str) -> tuple[int, str]:
        if isinstance(body, bytes):
            headers["Content-Type"] = "application/json"
            r = httpx.post(url, content=body, headers=headers)
        else:
            r = httpx.post(url, json=body, headers=headers)
        return r.status_code, r.json()["error"]["code"]

    wallet = f"Bearer {agent.wallet_key}"
    seller = f"Bearer {new_account(server.url).seller_key}"
    assert refused(bad) == (401, "unauthenticated")
    assert refused(b"[1]") == (401, "unauthenticated")
    assert refused(bad, Authorization="Bearer svc_vw_test_nope") == (401, "invalid_credential")
    assert refused(bad, Authorization=seller) == (403, "wrong_credential")
    assert refused(bad, Authorization=wallet, **{"X-Svc-Environment": "live"}) == (
        403,
        "environment_mismatch",
    )
    assert refused(bad, Authorization=wallet, **{"Idempotency-Key": "k" * 300}) == (
        400,
        "invalid_idempotency_key",
    )
    assert refused(b"[1]", Authorization=wallet) == (400, "invalid_json")
    assert refused(bad, Authorization=wallet) == (422, "validation_error")
    assert agent.client.spend.attempts().data == []

"""``GET /spend/attempts``: the key's attempts, newest first, paged, without bodies; and an
attempt whose process died is finished by the next retry of its Idempotency-Key."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import anyio.to_thread
import httpx
import pytest

from reference_server import outbound
from reference_server.domain.paid_fetch import attempts, offers, settlement
from reference_server.domain.paid_fetch.attempts import Order
from reference_server.domain.paid_fetch.hot_wallet import hot_wallet
from reference_server.web import idempotency
from reference_server.web.auth import Principal, Role

from ..sandbox.helpers import serve, transaction
from ..support import LiveServer
from .apps import PRICE, free_app
from .helpers import Agent, chain_balance, make_agent, new_key

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _list(agent: Agent, **query: Any) -> httpx.Response:
    return httpx.get(
        agent.live.url + "/spend/attempts",
        params=query,
        headers={"Authorization": f"Bearer {agent.wallet_key}"},
    )


def test_attempts_are_listed_newest_first_and_paged(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    with serve(free_app()) as url:
        refused = [
            agent.pay_url(url + "/free").json()["error"]["details"]["attempt_id"] for _ in range(2)
        ]
    paid = agent.pay_url(x402_url).json()
    expected = [paid["attempt_id"], *reversed(refused)]

    page = _list(agent, limit=2)
    assert page.status_code == 200, page.text
    body = page.json()
    assert [a["id"] for a in body["data"]] == expected[:2] and body["has_more"] is True
    first = body["data"][0]
    assert (first["status"], first["rail"], first["amount"], first["tx_hash"]) == (
        "succeeded",
        "x402",
        "0.25",
        paid["tx_hash"],
    )
    assert first["url"] == x402_url and first["method"] == "GET" and first["error"] is None
    assert "body" not in first
    failed = body["data"][1]
    assert failed["error"]["code"] == "not_payable" and failed["upstream_status"] == 200

    rest = _list(agent, limit=2, starting_after=body["data"][-1]["id"]).json()
    assert [a["id"] for a in rest["data"]] == expected[2:] and rest["has_more"] is False

    other = make_agent(server)
    assert _list(other).json()["data"] == []
    assert _list(other, starting_after=paid["attempt_id"]).status_code == 422
    assert _list(agent, limit=0).status_code == 422


async def _die_after_reserving(server: LiveServer, agent: Agent, url: str, key: str) -> Any:
    """Run a pay-url up to its reservation, as a process that then died would have: the
    credential signed and the money reserved, five minutes ago.  Returns the credential."""
    ctx = server.ctx
    wallet = hot_wallet(ctx, "test")
    policy = outbound.OutboundPolicy.from_settings(ctx.settings)
    probe = await outbound.send("GET", url, policy=policy)
    signed = await offers.sign_payment(wallet, probe, ["x402"])
    assert signed is not None
    then = ctx.now() - timedelta(minutes=5)
    principal = Principal(
        role=Role.WALLET,
        environment="test",
        owner_id=agent.owner_id,
        subject_id=agent.wallet_key_id,
        credential_id=f"vw:{agent.wallet_key_id}",
    )
    order = Order(url=url, method="GET", content=None, host=url.split("/")[2])
    fingerprint = idempotency.request_fingerprint("POST", "/spend/pay-url", {"url": url})
    with ctx.db.write() as conn:
        record = idempotency.claim(
            conn,
            idempotency.KeyClaim(
                scope=principal.credential_id,
                route="POST /spend/pay-url",
                key=key,
                fingerprint=fingerprint,
                now=then,
                ttl=None,
                lease=timedelta(seconds=ctx.settings.idempotency_lease_seconds),
            ),
            ctx.box,
        )
        assert isinstance(record, idempotency.Begun)
        started = attempts.begin(
            conn,
            agent=principal,
            order=order,
            record_id=record.record_id,
            fingerprint=fingerprint,
            request_id="req_died",
            now=then,
        )
        assert isinstance(started, attempts.Started)
        settlement.reserve(
            conn, attempt_id=started.attempt_id, wallet=wallet, signed=signed, now=then
        )
    assert agent.spend().spent_total == Decimal("0.25")
    return signed


@pytest.mark.anyio
async def test_a_retry_concludes_a_stale_attempt_that_never_paid(
    server: LiveServer, agent: Agent, x402_url: str, pay_to: str
) -> None:
    """Died before sending the credential: the retry cancels it on the chain and gives the
    money back."""
    key = new_key()
    await _die_after_reserving(server, agent, x402_url, key)
    again = await anyio.to_thread.run_sync(lambda: agent.pay_url(x402_url, key=key))
    assert again.status_code == 502, again.text
    assert again.json()["error"]["code"] == "upstream_unavailable"
    assert again.headers["idempotent-replayed"] == "true"
    assert agent.spend().spent_total == 0
    assert chain_balance(server, pay_to) == 0


@pytest.mark.anyio
async def test_a_retry_concludes_a_stale_attempt_that_paid(
    server: LiveServer, agent: Agent, x402_url: str, pay_to: str
) -> None:
    """Died after the URL settled, before the answer was recorded: the chain says it paid,
    so the retry posts the money and writes the receipt (the answer itself is lost)."""
    key = new_key()
    signed = await _die_after_reserving(server, agent, x402_url, key)
    async with httpx.AsyncClient() as http:
        delivered = await http.get(x402_url, headers={signed.header: signed.value})
    assert delivered.status_code == 200
    again = await anyio.to_thread.run_sync(lambda: agent.pay_url(x402_url, key=key))
    assert again.status_code == 200, again.text
    paid = again.json()
    assert paid["status"] == "succeeded" and paid["unlocked"] is False
    assert paid["upstream_status"] is None and paid["body"] == ""
    assert transaction(server.url, paid["tx_hash"])["to"] == pay_to
    assert agent.spend().spent_total == Decimal("0.25")
    assert chain_balance(server, pay_to) == PRICE


def test_the_sellers_receipt_a_url_returned_is_named(server: LiveServer) -> None:
    """A URL that is not a gate of ours but returns ``X-Svc-Receipt`` (an ``svc_asgi`` gate
    of another deployment): that receipt is the seller's; a header that is not a receipt
    id, or an attempt that did not succeed, names none."""

    def row(status: str = "succeeded", **headers: str) -> Any:
        return SimpleNamespace(
            status=status, tx_hash="0x" + "ab" * 32, environment="test", response_headers=headers
        )

    with server.ctx.db.read() as conn:
        assert attempts.seller_receipt_id(conn, row(**{"x-svc-receipt": "rcpt_x1"})) == "rcpt_x1"
        assert attempts.seller_receipt_id(conn, row(**{"x-svc-receipt": "a b; c"})) is None
        assert attempts.seller_receipt_id(conn, row()) is None
        failed = row("failed", **{"x-svc-receipt": "rcpt_x1"})
        assert attempts.seller_receipt_id(conn, failed) is None

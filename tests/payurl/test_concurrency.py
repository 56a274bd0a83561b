"""Fifty pay-url calls at once against an allowance that fits a few: exactly as many pay
as fit, on SQLite and PostgreSQL, and the chain and the ledger agree on every cent."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from decimal import Decimal

import httpx
import pytest

from reference_server.domain import ledger

from ..sandbox.helpers import serve
from ..support import LiveServer, assert_ledger_sound
from .apps import PRICE, Counting, fixed_challenge_mpp_app
from .helpers import Agent, chain_balance, events, make_agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
CALLS = 50
ALLOWANCE = Decimal("2.00")


async def _pay_many(agent: Agent, url: str, n: int) -> Counter[str]:
    async with httpx.AsyncClient(timeout=120) as http:

        async def one() -> str:
            r = await http.post(
                agent.live.url + "/spend/pay-url",
                json={"url": url},
                headers={
                    "Authorization": f"Bearer {agent.wallet_key}",
                    "Idempotency-Key": str(uuid.uuid4()),
                },
            )
            return "paid" if r.status_code == 200 else r.json()["error"]["code"]

        return Counter(await asyncio.gather(*(one() for _ in range(n))))


@pytest.mark.anyio
async def test_fifty_concurrent_calls_never_overspend_the_allowance(
    server: LiveServer, x402_url: str, pay_to: str
) -> None:
    agent = make_agent(server, allowance=str(ALLOWANCE), period="day")
    fit = int(ALLOWANCE / (Decimal(PRICE) / 1_000_000))
    outcome = await _pay_many(agent, x402_url, CALLS)
    assert outcome == Counter({"paid": fit, "allowance_exceeded": CALLS - fit})

    spent = Decimal(PRICE * fit) / 1_000_000
    state = agent.spend()
    assert state.spent_this_period == spent and state.remaining_allowance == 0
    assert state.balance == Decimal("10.00") - spent
    assert chain_balance(server, pay_to) == PRICE * fit
    with server.ctx.db.read() as conn:
        payouts = ledger.balance_micros(
            conn, environment="test", kind=ledger.CHAIN_PAYOUTS, ref_id=ledger.PLATFORM
        )
    assert payouts == PRICE * fit
    listed = agent.client.spend.attempts(limit=100).data
    assert Counter(a.status for a in listed) == Counter({"succeeded": fit, "failed": CALLS - fit})
    assert len(events(server, agent.owner_id, "payment.failed")) == CALLS - fit
    assert_ledger_sound(server)


@pytest.mark.anyio
async def test_concurrent_mpp_payments_each_settle_once(
    server: LiveServer, mpp_url: str, pay_to: str
) -> None:
    """MPP nonces come from the challenge, and concurrent probes can get the same one: each
    attempt still pays with a nonce of its own, and each payment is counted once."""
    n = 20
    agent = make_agent(server, allowed_rails=["mpp"], fund="10.00")
    outcome = await _pay_many(agent, mpp_url, n)
    assert outcome == Counter({"paid": n})
    assert chain_balance(server, pay_to) == PRICE * n
    assert agent.spend().spent_total == Decimal(PRICE * n) / 1_000_000
    assert_ledger_sound(server)


def test_a_challenge_whose_nonce_another_attempt_holds_is_never_signed_again(
    server: LiveServer, pay_to: str
) -> None:
    """The first attempt's credential is refused and its nonce cancelled; a later probe gets
    the same challenge, whose nonce is spent: refused, with nothing reserved."""
    agent = make_agent(server)
    app = Counting(fixed_challenge_mpp_app(pay_to))
    with serve(app) as url:
        first = agent.pay_url(url + "/report")
        second = agent.pay_url(url + "/report")
    assert (first.status_code, first.json()["error"]["code"]) == (502, "upstream_failed")
    assert (second.status_code, second.json()["error"]["code"]) == (409, "conflict")
    assert len(app.requests) == 2 + 3  # probe and paid request; then three probes
    assert chain_balance(server, pay_to) == 0
    assert agent.spend().spent_total == 0
    assert_ledger_sound(server)

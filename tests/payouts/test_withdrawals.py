"""Withdrawals: balance out through the ledger to the payout account, advanced by the
sandbox processor through the outbox worker; failures return the money; concurrency
never pays out more than the balance."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from decimal import Decimal

import attrs
import httpx
import pytest

from ..money.helpers import events_of
from ..support import LiveServer, assert_ledger_sound, server_processes
from .helpers import FAST_PAYOUTS, Shop, onboard, paid_out, shop, wait_for


@pytest.fixture
def fast(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(**FAST_PAYOUTS)


def test_a_withdrawal_reaches_paid_and_the_ledger_shows_the_money_out(fast: LiveServer) -> None:
    s = shop(fast)
    assert s.balance() == Decimal("9.90")
    onboard(s)
    r = s.withdraw("5.00")
    assert r.status_code == 201, r.text
    w = r.json()
    assert w["status"] == "pending" and w["amount"] == "5.00" and w["automatic"] is False
    assert s.balance() == Decimal("4.90")  # held at once
    seen = {wait_for(s, w["id"], "in_transit", "paid")["status"]}
    done = wait_for(s, w["id"], "paid")
    assert done["failure_reason"] is None
    seen.add("paid")
    assert s.balance() == Decimal("4.90")
    assert paid_out(fast) == Decimal("5.00")
    assert_ledger_sound(fast)
    (withdrawn,) = events_of(fast, s.acct.owner_id, "seller.withdrawn")
    assert withdrawn["destination"] == "payout_account"
    assert withdrawn["withdrawal_id"] == w["id"] and withdrawn["balance"] == "4.90"
    (paid,) = events_of(fast, s.acct.owner_id, "withdrawal.paid")
    assert paid["withdrawal_id"] == w["id"] and paid["amount"] == "5.00"
    listed = s.get("/sellers/me/withdrawals").json()
    assert [x["id"] for x in listed["data"]] == [w["id"]] and listed["has_more"] is False


def test_a_failing_bank_account_returns_the_money(fast: LiveServer) -> None:
    s = shop(fast)
    onboard(s, bank="fails")
    r = s.withdraw()  # all of it
    assert r.status_code == 201 and r.json()["amount"] == "9.90"
    assert s.balance() == Decimal("0.00")
    done = wait_for(s, r.json()["id"], "failed")
    assert "account_closed" in done["failure_reason"]
    assert s.balance() == Decimal("9.90")
    assert paid_out(fast) == 0
    (failed,) = events_of(fast, s.acct.owner_id, "withdrawal.failed")
    assert failed["withdrawal_id"] == r.json()["id"] and failed["reason"]
    assert events_of(fast, s.acct.owner_id, "withdrawal.paid") == []
    assert_ledger_sound(fast)


def test_withdraw_rules(fast: LiveServer) -> None:
    s = shop(fast)
    refused = s.withdraw()
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "payouts_not_enabled"
    assert "GET /sellers/me/balance" in refused.json()["error"]["message"]
    onboard(s)
    no_key = s.post("/sellers/me/withdraw", {})
    assert no_key.status_code == 400
    assert no_key.json()["error"]["code"] == "idempotency_key_required"
    too_much = s.withdraw("9.91")
    assert too_much.status_code == 402
    assert too_much.json()["error"]["code"] == "insufficient_funds"
    assert too_much.json()["error"]["details"]["available"] == "9.90"
    assert s.withdraw("0").status_code == 422
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = s.post("/sellers/me/withdraw", {"amount": "1.00"}, **key)
    again = s.post("/sellers/me/withdraw", {"amount": "1.00"}, **key)
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert s.balance() == Decimal("8.90")
    assert s.get("/sellers/me/withdrawals/wd_nope").status_code == 404
    other = shop(fast)
    assert other.get(f"/sellers/me/withdrawals/{first.json()['id']}").status_code == 404
    wait_for(s, first.json()["id"], "paid")


async def withdraw_many(urls: list[str], s: Shop, n: int, amount: str) -> Counter[str]:
    async with httpx.AsyncClient(timeout=120) as http:

        async def one(i: int) -> str:
            r = await http.post(
                urls[i % len(urls)] + "/sellers/me/withdraw",
                json={"amount": amount},
                headers={**s.auth, "Idempotency-Key": str(uuid.uuid4())},
            )
            return "created" if r.status_code == 201 else r.json()["error"]["code"]

        return Counter(await asyncio.gather(*(one(i) for i in range(n))))


def settle_all(s: Shop) -> list[dict[str, object]]:
    listed = s.get("/sellers/me/withdrawals?limit=100").json()["data"]
    return [wait_for(s, w["id"], "paid", "failed") for w in listed]


@pytest.mark.anyio
async def test_twenty_concurrent_withdrawals_never_pay_out_more_than_the_balance(
    fast: LiveServer,
) -> None:
    s = shop(fast)
    onboard(s)
    outcome = await withdraw_many([fast.url], s, 20, "1.00")
    assert outcome == Counter({"created": 9, "insufficient_funds": 11})
    done = settle_all(s)
    assert [w["status"] for w in done] == ["paid"] * 9
    assert paid_out(fast) == Decimal("9.00")
    assert s.balance() == Decimal("0.90")
    assert_ledger_sound(fast)


@pytest.mark.anyio
async def test_concurrent_withdrawals_across_two_server_processes(
    database_url: str, fast: LiveServer
) -> None:
    """Three workers (this server's and two processes') advance the same payouts: each is
    paid once, and no more than the balance leaves."""
    s = shop(fast, price="5.00", sales=2)  # 9.90
    onboard(s)
    env = {"SVC_SANDBOX_PAYOUT_SECONDS": "0.2", "SVC_WORKER_POLL_SECONDS": "0.05"}
    with server_processes(database_url, 2, env=env) as urls:
        outcome = await withdraw_many(urls, s, 20, "1.00")
        assert outcome == Counter({"created": 9, "insufficient_funds": 11})
        done = settle_all(s)
    assert [w["status"] for w in done] == ["paid"] * 9
    assert len(events_of(fast, s.acct.owner_id, "withdrawal.paid")) == 9
    assert paid_out(fast) == Decimal("9.00")
    assert s.balance() == Decimal("0.90")
    assert_ledger_sound(fast)


def test_a_payout_survives_a_restart(make_server: Callable[..., LiveServer]) -> None:
    """The withdrawal is made on a server without a worker that then stops; the next
    server's worker finds it in the database and sees it paid."""
    first = make_server(**FAST_PAYOUTS, worker_enabled=False)
    s = shop(first)
    onboard(s)
    w = s.withdraw("4.00").json()
    first.stop()
    second = make_server(**FAST_PAYOUTS)
    s = attrs.evolve(s, url=second.url)
    assert wait_for(s, w["id"], "paid")["amount"] == "4.00"
    assert paid_out(second) == Decimal("4.00")

"""Connect payouts through Stripe (the official SDK against the local Stripe of
tests/stripe_double): a live seller onboards by following the account link, is enabled by
``account.updated`` alone, withdraws (a transfer and a payout, each with an idempotency key
derived from the withdrawal), and is paid by ``payout.paid``; a failed payout gives the money
back; a redelivered event changes nothing; the processor failing keeps the withdrawal pending;
20 concurrent withdrawals never transfer more than the balance."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from sqlalchemy import select

from reference_server import Settings
from reference_server.domain import card_payments
from reference_server.store import tables as t

from ..conftest import fresh_database
from ..stripe_double.running import StripeDouble
from ..support import (
    TEST_SETTINGS,
    Account,
    LiveServer,
    assert_ledger_sound,
    new_account,
    start_server,
    until,
)
from .helpers import WEBHOOK_SECRET

SECRET_KEY = "sk_test_connect_" + "k" * 16


@pytest.fixture
def live(stripe_double: StripeDouble, tmp_path: Path) -> Iterator[LiveServer]:
    stripe_double.reset()
    settings = {
        **TEST_SETTINGS,
        "processor": "stripe",
        "stripe_secret_key": SECRET_KEY,
        "stripe_webhook_secret": WEBHOOK_SECRET,
        "stripe_api_base": stripe_double.api_base,
        "stripe_max_network_retries": 2,
        "worker_poll_seconds": 0.05,
        "sandbox_payout_seconds": 0.2,  # the retry delay of an unreachable processor: 0.2 s
        "auto_payout_minimum_micros": 0,
    }
    with fresh_database(tmp_path) as url:
        server = start_server(Settings(**{**settings, "database_url": url}))
        stripe_double.set_webhook(server.url + "/processor/webhooks", WEBHOOK_SECRET)
        yield server
        server.stop()
        assert_ledger_sound(server)


@attrs.frozen
class Seller:
    url: str
    acct: Account

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.acct.seller_key}", **headers}
        return httpx.request(method, self.url + path, json=body, headers=auth, timeout=60)

    def withdraw(self, amount: str | None = None) -> httpx.Response:
        body = {} if amount is None else {"amount": amount}
        key = {"Idempotency-Key": str(uuid.uuid4())}
        return self.call("POST", "/sellers/me/withdraw", body, **key)

    def balance(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/sellers/me/balance").json()
        return answer

    def withdrawal(self, withdrawal_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", f"/sellers/me/withdrawals/{withdrawal_id}").json()
        return answer


def live_seller(server: LiveServer, *, sales: int, price: str = "10.00") -> Seller:
    """A live seller with ``sales`` card sales of ``price`` booked (99 % after the fee)."""
    acct = new_account(server.url, "live")
    r = httpx.post(
        server.url + "/resources",
        json={"kind": "http", "path": "/v1/report", "amount": price},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    )
    assert r.status_code == 201, r.text
    with server.ctx.db.write() as conn:
        resource = conn.execute(select(t.resources).where(t.resources.c.id == r.json()["id"])).one()
        for _ in range(sales):
            card_payments.book_card_sale(
                conn,
                resource=resource,
                fee_bps=server.settings.platform_fee_bps,
                request_id="req_test",
                now=server.ctx.now(),
            )
    return Seller(url=server.url, acct=acct)


def onboarded(seller: Seller, double: StripeDouble) -> str:
    """Onboard by following the account link as a person would; the account id."""
    r = seller.call("POST", "/sellers/me/connect/onboard", {"country": "US"})
    assert r.status_code == 200, r.text
    url = r.json()["onboard_url"]
    assert url.startswith(double.api_base + "/_double/onboard/")
    page = httpx.get(url)
    assert page.status_code == 200 and "Complete onboarding" in page.text
    action = page.text.split('action="', 1)[1].split('"', 1)[0]
    back = httpx.post(double.api_base + action.replace("&amp;", "&"), follow_redirects=True)
    assert back.status_code == 200 and "Payout account details sent" in back.text
    assert str(back.url).startswith(seller.url + "/processor/connect/return")
    account_id: str = r.json()["account"]["account_id"]
    return account_id


def _sent(double: StripeDouble, method: str, path: str) -> list[dict[str, Any]]:
    return [r for r in double.requests() if r["method"] == method and r["path"].startswith(path)]


def _events(server: LiveServer, owner_id: str, type: str) -> list[dict[str, Any]]:
    ev = t.events
    with server.ctx.db.read() as conn:
        rows = conn.execute(
            select(ev.c.data).where(ev.c.owner_id == owner_id, ev.c.type == type)
        ).all()
    return [dict(row.data) for row in rows]


def test_onboard_by_the_link_is_enabled_by_the_event_then_a_withdrawal_is_paid(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=2)  # 19.80 after fees
    account_id = onboarded(seller, stripe_double)
    created = _sent(stripe_double, "POST", "/v1/accounts")
    assert [r["idempotency_key"] for r in created] == [f"{seller.acct.seller_id}:account"]

    # account.updated alone enables payouts: no sync call
    until(lambda: seller.call("GET", "/sellers/me/connect").json()["payouts_enabled"])
    assert seller.balance()["payouts_enabled"] is True
    login = seller.call("POST", "/sellers/me/connect/login")
    assert login.status_code == 200
    assert login.json()["login_url"].startswith(stripe_double.api_base + "/_double/express/")
    assert _sent(stripe_double, "POST", f"/v1/accounts/{account_id}/login_links")

    r = seller.withdraw()
    assert r.status_code == 201, r.text
    withdrawal = r.json()
    assert Decimal(withdrawal["amount"]) == Decimal("19.80")
    transfer = until(lambda: _sent(stripe_double, "POST", "/v1/transfers"))
    payout = until(lambda: _sent(stripe_double, "POST", "/v1/payouts"))
    assert [r["idempotency_key"] for r in transfer] == [f"{withdrawal['id']}:transfer"]
    assert [r["idempotency_key"] for r in payout] == [f"{withdrawal['id']}:payout"]
    assert payout[0]["stripe_account"] == account_id
    payout_id = until(lambda: _payout_id(live, withdrawal["id"]))
    assert seller.withdrawal(withdrawal["id"])["status"] == "pending"

    stripe_double.settle_payout(payout_id, "paid")
    until(lambda: seller.withdrawal(withdrawal["id"])["status"] == "paid")
    paid = _events(live, seller.acct.owner_id, "withdrawal.paid")
    assert [e["withdrawal_id"] for e in paid] == [withdrawal["id"]]
    assert Decimal(seller.balance()["balance"]) == 0


def _payout_id(server: LiveServer, withdrawal_id: str) -> str | None:
    w = t.withdrawals
    with server.ctx.db.read() as conn:
        value = conn.execute(
            select(w.c.processor_payout_id).where(w.c.id == withdrawal_id)
        ).scalar()
    return None if value is None else str(value)


def test_a_failed_payout_gives_the_money_back_with_the_processors_reason(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=1)
    onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    withdrawal = seller.withdraw("5.00").json()
    payout_id = until(lambda: _payout_id(live, withdrawal["id"]))
    assert Decimal(seller.balance()["balance"]) == Decimal("4.90")

    stripe_double.settle_payout(
        payout_id,
        "failed",
        failure_code="account_closed",
        failure_message="The bank account is closed.",
    )
    failed = until(lambda: (w := seller.withdrawal(withdrawal["id"]))["status"] == "failed" and w)
    assert "account_closed" in failed["failure_reason"]
    assert Decimal(seller.balance()["balance"]) == Decimal("9.90")
    events = _events(live, seller.acct.owner_id, "withdrawal.failed")
    assert [e["withdrawal_id"] for e in events] == [withdrawal["id"]]
    assert "account_closed" in events[0]["reason"]

    # Redelivered, the event changes nothing: no second refund of the held amount.
    failed_event = [d for d in stripe_double.deliveries() if d["type"] == "payout.failed"]
    stripe_double.redeliver(failed_event[0]["event"])
    until(
        lambda: [
            d
            for d in stripe_double.deliveries()
            if d["type"] == "payout.failed" and d["status"] == "delivered"
        ]
    )
    time.sleep(0.5)
    assert Decimal(seller.balance()["balance"]) == Decimal("9.90")
    assert len(_events(live, seller.acct.owner_id, "withdrawal.failed")) == 1


def test_requirements_that_reappear_stop_payouts(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=1)
    account_id = onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    # A sync reads the account at our clock; the event that follows within the same
    # second (Stripe stamps whole seconds) still carries a later change.
    synced = seller.call("POST", "/sellers/me/connect/sync")
    assert synced.status_code == 200 and synced.json()["payouts_enabled"] is True
    assert _sent(stripe_double, "GET", f"/v1/accounts/{account_id}")
    stripe_double.require(account_id, ["individual.verification.document"])
    until(lambda: not seller.balance()["payouts_enabled"])
    connect = seller.call("GET", "/sellers/me/connect").json()
    assert connect["requirements_due"] == ["individual.verification.document"]
    r = seller.withdraw()
    assert r.status_code == 409 and r.json()["error"]["code"] == "payouts_not_enabled"
    # auto payout (on, minimum 0 here) starts nothing either
    time.sleep(0.5)
    assert _sent(stripe_double, "POST", "/v1/transfers") == []


@pytest.mark.parametrize("status", [500, 429], ids=["failing", "rate-limiting"])
def test_an_unreachable_processor_keeps_the_withdrawal_pending_then_it_pays_once(
    live: LiveServer, stripe_double: StripeDouble, status: int
) -> None:
    seller = live_seller(live, sales=1)
    onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    # Every try of the worker's first rounds fails: a 500 is retried by the SDK (twice
    # each round), a 429 by the worker's next round.
    stripe_double.fault("/v1/transfers", status=status, times=6)
    withdrawal = seller.withdraw("3.00").json()
    until(lambda: len(_sent(stripe_double, "POST", "/v1/transfers")) >= 6)
    assert seller.withdrawal(withdrawal["id"])["status"] == "pending"
    payout_id = until(lambda: _payout_id(live, withdrawal["id"]))
    transfers = _sent(stripe_double, "POST", "/v1/transfers")
    assert {r["idempotency_key"] for r in transfers} == {f"{withdrawal['id']}:transfer"}
    assert [r["status"] for r in transfers if r["status"] == 200][:1] == [200]
    stripe_double.settle_payout(payout_id, "paid")
    until(lambda: seller.withdrawal(withdrawal["id"])["status"] == "paid")
    # One transfer at the processor however many times it was asked.
    assert len({r["idempotency_key"] for r in transfers}) == 1


def test_a_processor_refusal_fails_the_withdrawal_and_returns_the_money(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=1)
    onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    stripe_double.set_platform_balance(0)  # Stripe: balance_insufficient
    withdrawal = seller.withdraw("2.00").json()
    failed = until(lambda: (w := seller.withdrawal(withdrawal["id"]))["status"] == "failed" and w)
    assert "balance_insufficient" in failed["failure_reason"]
    assert Decimal(seller.balance()["balance"]) == Decimal("9.90")


def test_withdrawals_through_stripe_are_whole_cents(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=1, price="0.335555")  # 0.3322 after the fee
    onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    r = seller.withdraw("0.125")
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    r = seller.withdraw()  # all that is available, in whole cents
    assert r.status_code == 201 and r.json()["amount"] == "0.33"
    assert Decimal("0") < Decimal(seller.balance()["balance"]) < Decimal("0.01")


def test_twenty_concurrent_withdrawals_never_transfer_more_than_the_balance(
    live: LiveServer, stripe_double: StripeDouble
) -> None:
    seller = live_seller(live, sales=1)  # 9.90
    onboarded(seller, stripe_double)
    until(lambda: seller.balance()["payouts_enabled"])
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: seller.withdraw("1.00"), range(20)))
    created = [a.json()["id"] for a in answers if a.status_code == 201]
    refused = [a.json()["error"]["code"] for a in answers if a.status_code != 201]
    assert len(created) == 9 and set(refused) == {"insufficient_funds"}
    until(lambda: all(_payout_id(live, w) for w in created))
    transfers = [r for r in _sent(stripe_double, "POST", "/v1/transfers") if r["status"] == 200]
    assert len({r["idempotency_key"] for r in transfers}) == 9
    assert Decimal(seller.balance()["balance"]) == Decimal("0.90")

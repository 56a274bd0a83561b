"""Payouts on both clients: Connect and withdrawals with the seller key, and the owner
dashboard's twins (``seller_id=``, owner JWT) of every seller route.

The request shapes are checked against an ``httpx.MockTransport`` answering with the
server's contract (``tests/e2e/test_sdk_payouts.py`` drives a live server).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest
from sdk_support import (
    ALL_CREDENTIALS,
    OWNER_JWT,
    SELLER_KEY,
    WALLET_KEY,
    Twin,
    check_request,
    ok,
)

import svc

pytestmark = pytest.mark.anyio

ACCOUNT = {
    "seller_id": "sel_1",
    "environment": "test",
    "status": "enabled",
    "payouts_enabled": True,
    "details_submitted": True,
    "requirements_due": [],
    "account_id": "acct_sbx_1",
    "type": "express",
    "country": "US",
    "auto_payout": True,
    "auto_payout_minimum": "100.00",
    "synced_at": "2026-01-02T03:04:05Z",
}
ONBOARDING = {
    "seller_id": "sel_1",
    "onboard_url": "http://127.0.0.1:8000/sandbox/connect/onboard/tok",
    "expires_at": "2026-01-02T03:34:05Z",
    "account": {**ACCOUNT, "status": "onboarding", "payouts_enabled": False},
}
LOGIN = {"seller_id": "sel_1", "login_url": "http://127.0.0.1:8000/sandbox/connect/login/tok"}
WITHDRAWAL = {
    "id": "wd_1",
    "status": "pending",
    "amount": "5.00",
    "currency": "USD",
    "seller_id": "sel_1",
    "environment": "test",
    "automatic": False,
    "failure_reason": None,
    "created_at": "2026-01-02T03:04:05Z",
}
SELLER = {"id": "sel_1", "environment": "test", "name": "Shop", "status": "active"}
BALANCE = {"seller_id": "sel_1", "environment": "test", "balance": "9.90"}
BODIES: dict[type, dict[str, Any]] = {
    svc.ConnectAccount: ACCOUNT,
    svc.ConnectOnboarding: ONBOARDING,
    svc.ConnectLogin: LOGIN,
    svc.Withdrawal: WITHDRAWAL,
    svc.WithdrawalList: {"data": [WITHDRAWAL], "has_more": False},
    svc.Seller: SELLER,
    svc.Balance: BALANCE,
    svc.ResourceList: {"data": [], "has_more": False},
}

# (call with the seller key, "METHOD /path under /sellers/me", JSON body, result type)
SELLER_ROUTES: list[tuple[Any, str, dict[str, Any] | None, type]] = [
    (lambda c, **k: c.connect.status(**k), "GET /connect", None, svc.ConnectAccount),
    (
        lambda c, **k: c.connect.onboard("us", "express", **k),
        "POST /connect/onboard",
        {"country": "US", "type": "express"},
        svc.ConnectOnboarding,
    ),
    (
        lambda c, **k: c.connect.onboard(country="DE", **k),
        "POST /connect/onboard",
        {"country": "DE"},
        svc.ConnectOnboarding,
    ),
    (lambda c, **k: c.connect.sync(**k), "POST /connect/sync", {}, svc.ConnectAccount),
    (lambda c, **k: c.connect.login(**k), "POST /connect/login", {}, svc.ConnectLogin),
    (
        lambda c, **k: c.connect.update(auto_payout=False, **k),
        "PATCH /connect",
        {"auto_payout": False},
        svc.ConnectAccount,
    ),
    (
        lambda c, **k: c.connect.update(auto_payout_minimum="50", **k),
        "PATCH /connect",
        {"auto_payout_minimum": "50.00"},
        svc.ConnectAccount,
    ),
    (
        lambda c, **k: c.connect.update(auto_payout=True, auto_payout_minimum=None, **k),
        "PATCH /connect",
        {"auto_payout": True, "auto_payout_minimum": None},
        svc.ConnectAccount,
    ),
    (lambda c, **k: c.withdrawals.create(**k), "POST /withdraw", {}, svc.Withdrawal),
    (
        lambda c, **k: c.withdrawals.create(Decimal("5"), **k),
        "POST /withdraw",
        {"amount": "5.00"},
        svc.Withdrawal,
    ),
    (lambda c, **k: c.withdrawals.list(**k), "GET /withdrawals", None, svc.WithdrawalList),
    (lambda c, **k: c.withdrawals.get("wd_1", **k), "GET /withdrawals/wd_1", None, svc.Withdrawal),
    (lambda c, **k: c.sellers.balance(**k), "GET /balance", None, svc.Balance),
    (lambda c, **k: c.sellers.enable_payments(**k), "PATCH /payments", {}, svc.Seller),
]
IDS = [r + (f" {b}" if b else "") for _, r, b, _ in SELLER_ROUTES]


@pytest.mark.parametrize("role", ["seller", "owner"])
@pytest.mark.parametrize(("call", "route", "body", "result_type"), SELLER_ROUTES, ids=IDS)
async def test_seller_routes_and_their_owner_dashboard_twins(
    twin: Twin,
    role: str,
    call: Any,
    route: str,
    body: dict[str, Any] | None,
    result_type: type,
) -> None:
    """Each route with the seller key under ``/sellers/me``, and its owner-dashboard twin
    (``seller_id=``, owner JWT) under ``/sellers/{id}``."""
    client = twin.client(environment="test", **ALL_CREDENTIALS)
    twin.reply(ok(BODIES[result_type], status=201 if route == "POST /withdraw" else 200))
    owner = role == "owner"

    result = await twin.call(client, (lambda c: call(c, seller_id="sel_1")) if owner else call)

    assert isinstance(result, result_type) and result.request_id == "req_ok"
    method, tail = route.split(" ")
    prefix = "/sellers/sel_1" if owner else "/sellers/me"
    check_request(twin.last, f"{method} {prefix}{tail}", role, body, "test")


async def test_owner_reads_a_seller_and_its_resources(twin: Twin) -> None:
    client = twin.client(environment="test", owner_jwt=OWNER_JWT)
    twin.reply(ok(SELLER), ok(BODIES[svc.ResourceList]), ok(BODIES[svc.ResourceList]))

    seller = await twin.call(client, lambda c: c.sellers.get("sel_1"))
    await twin.call(client, lambda c: c.resources.list(seller_id="sel_1", limit=5))

    assert seller.id == "sel_1"
    check_request(twin.requests[0], "GET /sellers/sel_1", "owner", None, "test")
    check_request(twin.last, "GET /sellers/sel_1/resources?limit=5", "owner", None, "test")


async def test_the_onboarding_and_withdrawal_are_typed(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(ONBOARDING), ok(WITHDRAWAL, status=201))

    link = await twin.call(client, lambda c: c.connect.onboard("US"))
    withdrawal = await twin.call(client, lambda c: c.withdrawals.create("5.00"))

    assert link.onboard_url.endswith("/tok") and link.account.payouts_enabled is False
    assert link.expires_at is not None and link.expires_at.tzinfo is not None
    assert withdrawal.amount == Decimal("5.00") and withdrawal.status == "pending"


async def test_a_retried_withdraw_reuses_its_idempotency_key(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(httpx.ConnectError("down"), ok(WITHDRAWAL, status=201))

    await twin.call(client, lambda c: c.withdrawals.create("5"))

    first, second = twin.requests
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.withdrawals.create("0"), "greater than zero"),
        (lambda c: c.withdrawals.create(1.5), "amount"),
        (lambda c: c.withdrawals.create("-1"), "amount"),
        (lambda c: c.connect.onboard("USA"), "two-letter"),
        (lambda c: c.connect.onboard("US", "custom"), "type must be one of"),
        (lambda c: c.connect.update(), "needs auto_payout"),
        (lambda c: c.connect.update(auto_payout="yes"), "True or False"),
        (lambda c: c.connect.update(auto_payout_minimum="-5"), "auto_payout_minimum"),
        (lambda c: c.withdrawals.get(""), "non-empty"),
        (lambda c: c.withdrawals.get("wd_1", seller_id=""), "non-empty"),
        (lambda c: c.sellers.get(""), "non-empty"),
    ],
)
async def test_bad_arguments_fail_before_sending(twin: Twin, call: Any, match: str) -> None:
    await twin.refuses(twin.client(**ALL_CREDENTIALS), call, ValueError, match)


@pytest.mark.parametrize(
    ("call", "needs"),
    [
        (lambda c: c.connect.sync(), "SVC_SELLER_KEY"),
        (lambda c: c.withdrawals.create(), "SVC_SELLER_KEY"),
        (lambda c: c.connect.sync(seller_id="sel_1"), "SVC_OWNER_JWT"),
        (lambda c: c.withdrawals.list(seller_id="sel_1"), "SVC_OWNER_JWT"),
    ],
)
async def test_missing_credential_fails_before_any_request(
    twin: Twin, call: Any, needs: str
) -> None:
    await twin.refuses(twin.client(wallet_key=WALLET_KEY), call, svc.ConfigurationError, needs)


async def test_ids_are_percent_encoded(twin: Twin) -> None:
    client = twin.client(**ALL_CREDENTIALS)
    twin.reply(ok(WITHDRAWAL), ok(WITHDRAWAL))

    await twin.call(client, lambda c: c.withdrawals.get("../wd_2"))
    await twin.call(client, lambda c: c.withdrawals.get("wd_1", seller_id="../me"))

    assert [r.url.raw_path for r in twin.requests] == [
        b"/sellers/me/withdrawals/..%2Fwd_2",
        b"/sellers/..%2Fme/withdrawals/wd_1",
    ]

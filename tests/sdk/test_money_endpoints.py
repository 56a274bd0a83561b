"""Wallet keys, spend balance, ``pay``, handles and receipt verification on both clients.

Every scenario runs on ``svc.Client`` and ``svc.AsyncClient`` through the ``twin`` fixture
(see conftest), against an ``httpx.MockTransport`` answering with the server's contract:
flat JSON bodies with ``ok`` and ``request_id``, lists as ``{"data", "has_more"}``.
"""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from sdk_support import (
    ALL_CREDENTIALS,
    OWNER_JWT,
    SELLER_KEY,
    WALLET_KEY,
    Twin,
    body_of,
    check_request,
    fail,
    ok,
)

import svc

pytestmark = pytest.mark.anyio

POLICY = {
    "allowance": "10.00",
    "max_per_tx": "0.50",
    "budget": "100.00",
    "period": "day",
    "allowed_hosts": ["api.example.com"],
    "allowed_rails": ["x402", "rill"],
}
WALLET_KEY_BODY = {
    "id": "vw_1",
    "environment": "test",
    "policy": POLICY,
    "balance": "25.00",
    "name": "research-agent",
    "status": "active",
    "key_prefix": "svc_vw_test_ab",
    "created_at": "2025-01-02T03:04:05Z",
}
WALLET_KEY_CREATED = {**WALLET_KEY_BODY, "balance": "0.00", "key": "svc_vw_test_shown_once"}
SPEND_BALANCE = {
    "balance": "24.95",
    "policy": POLICY,
    "remaining_allowance": "9.95",
    "remaining_budget": "99.95",
    "spent_this_period": "0.05",
    "spent_total": "0.05",
    "period_started_at": "2025-01-02T00:00:00Z",
    "next_reset_at": "2025-01-03T00:00:00Z",
    "status": "active",
    "wallet_key_id": "vw_1",
    "environment": "test",
}
RESOURCE_PAID = {
    "receipt_id": "rcpt_1",
    "rail": "rill",
    "amount": "0.05",
    "resource_id": "res_1",
    "settlement": "ledger",
}
TRANSFER = {
    "receipt_id": "rcpt_2",
    "rail": "rill",
    "amount": "1.50",
    "destination": "@alice",
    "settlement": "ledger",
}
HANDLE = {
    "id": "hdl_1",
    "handle": "@alice",
    "environment": "test",
    "created_at": "2025-01-02T03:04:05+00:00",
}
RESOLUTION = {"destination": "@alice", "handle": "alice", "environment": "test"}
VERIFIED = {
    "valid": True,
    "receipt_id": "rcpt_1",
    "resource_id": "res_1",
    "amount": "0.05",
    "rail": "rill",
    "metadata": {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "call"},
}
BODIES: dict[type, dict[str, Any]] = {
    svc.WalletKeyCreated: WALLET_KEY_CREATED,
    svc.WalletKey: WALLET_KEY_BODY,
    svc.WalletKeyList: {"data": [WALLET_KEY_BODY], "has_more": False},
    svc.SpendBalance: SPEND_BALANCE,
    svc.PayResult: RESOURCE_PAID,
    svc.Handle: HANDLE,
    svc.HandleResolution: RESOLUTION,
    svc.ReceiptVerification: VERIFIED,
}

# (call, "METHOD /path", role, JSON body or None, result type)
ENDPOINTS: list[tuple[Any, str, str | None, dict[str, Any] | None, type]] = [
    (
        lambda c: c.wallet_keys.create(
            "research-agent",
            allowance="10",
            max_per_tx=Decimal("0.500"),
            budget=100,
            period="day",
            allowed_hosts=["api.example.com"],
            allowed_rails=("x402", "rill"),
        ),
        "POST /wallet-keys",
        "owner",
        {
            "name": "research-agent",
            "policy": {
                "allowance": "10.00",
                "max_per_tx": "0.50",
                "budget": "100.00",
                "period": "day",
                "allowed_hosts": ["api.example.com"],
                "allowed_rails": ["x402", "rill"],
            },
        },
        svc.WalletKeyCreated,
    ),
    (
        lambda c: c.wallet_keys.create(max_per_tx="0.25"),
        "POST /wallet-keys",
        "owner",
        {"policy": {"max_per_tx": "0.25"}},
        svc.WalletKeyCreated,
    ),
    (
        lambda c: c.wallet_keys.create(),
        "POST /wallet-keys",
        "owner",
        {"policy": {}},
        svc.WalletKeyCreated,
    ),
    (lambda c: c.wallet_keys.list(), "GET /wallet-keys", "owner", None, svc.WalletKeyList),
    (lambda c: c.wallet_keys.get("vw_1"), "GET /wallet-keys/vw_1", "owner", None, svc.WalletKey),
    (
        lambda c: c.wallet_keys.update("vw_1", allowance="20", period="week"),
        "PATCH /wallet-keys/vw_1",
        "owner",
        {"policy": {"allowance": "20.00", "period": "week"}},
        svc.WalletKey,
    ),
    (
        lambda c: c.wallet_keys.fund("vw_1", "25"),
        "POST /wallet-keys/vw_1/fund",
        "owner",
        {"amount": "25.00"},
        svc.WalletKey,
    ),
    (
        lambda c: c.wallet_keys.refund("vw_1", Decimal("5.5")),
        "POST /wallet-keys/vw_1/refund",
        "owner",
        {"amount": "5.50"},
        svc.WalletKey,
    ),
    (
        lambda c: c.wallet_keys.revoke("vw_1"),
        "POST /wallet-keys/vw_1/revoke",
        "owner",
        {},
        svc.WalletKey,
    ),
    (
        lambda c: c.handles.create("@alice"),
        "POST /handles",
        "owner",
        {"handle": "@alice"},
        svc.Handle,
    ),
    (
        lambda c: c.handles.create("alice"),
        "POST /handles",
        "owner",
        {"handle": "alice"},
        svc.Handle,
    ),
    (lambda c: c.spend.balance(), "GET /spend/balance", "wallet", None, svc.SpendBalance),
    (
        lambda c: c.pay(resource_id="res_1"),
        "POST /pay",
        "wallet",
        {"resource_id": "res_1"},
        svc.PayResult,
    ),
    (
        lambda c: c.pay(destination="@alice", amount="1.5"),
        "POST /pay",
        "wallet",
        {"destination": "@alice", "amount": "1.50"},
        svc.PayResult,
    ),
    (
        lambda c: c.handles.resolve("@alice"),
        "GET /handles/resolve/@alice",
        "wallet",
        None,
        svc.HandleResolution,
    ),
    (
        lambda c: c.access.verify("rcpt_1", "res_1"),
        "POST /access/verify",
        "seller",  # the client holds a seller key, so it is sent
        {"receipt_id": "rcpt_1", "resource_id": "res_1"},
        svc.ReceiptVerification,
    ),
    (
        lambda c: c.access.verify("rcpt_1"),
        "POST /access/verify",
        "seller",
        {"receipt_id": "rcpt_1"},
        svc.ReceiptVerification,
    ),
]


# --- request shape ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "route", "role", "body", "result_type"),
    ENDPOINTS,
    ids=[r + (f" {b}" if b else "") for _, r, _, b, _ in ENDPOINTS],
)
async def test_endpoint_request_shape(
    twin: Twin,
    call: Any,
    route: str,
    role: str | None,
    body: dict[str, Any] | None,
    result_type: type,
) -> None:
    client = twin.client(environment="test", **ALL_CREDENTIALS)
    created = route in ("POST /wallet-keys", "POST /handles")
    twin.reply(ok(BODIES[result_type], status=201 if created else 200))

    result = await twin.call(client, call)

    assert isinstance(result, result_type)
    assert result.request_id == "req_ok"
    check_request(twin.last, route, role, body, "test")


async def test_environment_header_follows_the_client_and_the_call(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, environment="live")
    twin.reply(ok(BODIES[svc.WalletKeyList]), ok(BODIES[svc.WalletKeyList]))

    await twin.call(client, lambda c: c.wallet_keys.list())
    options = svc.RequestOptions(environment="test")
    await twin.call(client, lambda c: c.wallet_keys.list(options=options))

    assert [r.headers["x-svc-environment"] for r in twin.requests] == ["live", "test"]


async def test_owner_routes_without_environment_send_no_header(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(WALLET_KEY_CREATED, status=201))

    await twin.call(client, lambda c: c.wallet_keys.create("k"))

    assert "x-svc-environment" not in twin.last.headers  # the service then means live


@pytest.mark.parametrize(
    ("call", "needs"),
    [
        (lambda c: c.wallet_keys.create("k"), "SVC_OWNER_JWT"),
        (lambda c: c.wallet_keys.list(), "SVC_OWNER_JWT"),
        (lambda c: c.wallet_keys.fund("vw_1", "1"), "SVC_OWNER_JWT"),
        (lambda c: c.handles.create("@alice"), "SVC_OWNER_JWT"),
        (lambda c: c.spend.balance(), "SVC_WALLET_KEY"),
        (lambda c: c.pay(resource_id="res_1"), "SVC_WALLET_KEY"),
        (lambda c: c.handles.resolve("@alice"), "SVC_WALLET_KEY"),
    ],
)
async def test_missing_credential_fails_before_any_request(
    twin: Twin, call: Any, needs: str
) -> None:
    # a seller key stands in for nothing here
    await twin.refuses(twin.client(seller_key=SELLER_KEY), call, svc.ConfigurationError, needs)


async def test_path_parameters_are_percent_encoded(twin: Twin) -> None:
    client = twin.client(**ALL_CREDENTIALS)
    twin.reply(ok(RESOLUTION), ok(RESOLUTION), ok(WALLET_KEY_BODY))

    await twin.call(client, lambda c: c.handles.resolve("@alice"))
    await twin.call(client, lambda c: c.handles.resolve("../wallet-keys"))
    await twin.call(client, lambda c: c.wallet_keys.fund("../vw_2", "1"))

    paths = [r.url.raw_path for r in twin.requests]
    assert paths == [
        b"/handles/resolve/%40alice",
        b"/handles/resolve/..%2Fwallet-keys",
        b"/wallet-keys/..%2Fvw_2/fund",
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.wallet_keys.get(""),
        lambda c: c.wallet_keys.revoke(""),
        lambda c: c.handles.resolve(""),
        lambda c: c.handles.create(""),
        lambda c: c.handles.create("@"),
        lambda c: c.access.verify(""),
        lambda c: c.access.verify("rcpt_1", ""),
    ],
)
async def test_empty_ids_are_refused_before_sending(twin: Twin, call: Any) -> None:
    await twin.refuses(twin.client(**ALL_CREDENTIALS), call, ValueError, r"non-empty|name after")


# --- wallet key policies: given, omitted, cleared -------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "body"),
    [
        ({"name": "renamed"}, {"name": "renamed"}),
        ({"max_per_tx": None}, {"policy": {"max_per_tx": None}}),
        (
            {"allowance": None, "budget": "50", "allowed_hosts": None, "allowed_rails": None},
            {
                "policy": {
                    "allowance": None,
                    "budget": "50.00",
                    "allowed_hosts": None,
                    "allowed_rails": None,
                }
            },
        ),
        (
            {"name": "n", "period": "none", "allowed_hosts": ["a.example", "b.example"]},
            {
                "name": "n",
                "policy": {"period": "none", "allowed_hosts": ["a.example", "b.example"]},
            },
        ),
        ({"allowance": 0}, {"policy": {"allowance": "0.00"}}),
        ({"max_per_tx": svc.NOT_GIVEN, "budget": None}, {"policy": {"budget": None}}),
    ],
    ids=["name", "clear-one", "clear-and-set", "set", "zero", "explicit-not-given"],
)
async def test_update_sends_null_for_none_and_omits_what_is_not_given(
    twin: Twin, kwargs: dict[str, Any], body: dict[str, Any]
) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(WALLET_KEY_BODY))

    await twin.call(client, lambda c: c.wallet_keys.update("vw_1", **kwargs))

    check_request(twin.last, "PATCH /wallet-keys/vw_1", "owner", body)


async def test_update_wire_body_carries_json_null(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(WALLET_KEY_BODY))

    await twin.call(client, lambda c: c.wallet_keys.update("vw_1", max_per_tx=None))

    assert twin.last.content == b'{"policy":{"max_per_tx":null}}'


async def test_create_leaves_out_limits_passed_as_none(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(WALLET_KEY_CREATED, status=201))

    await twin.call(
        client,
        lambda c: c.wallet_keys.create(None, allowance=None, budget="5", allowed_hosts=None),
    )

    assert body_of(twin.last) == {"policy": {"budget": "5.00"}}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.wallet_keys.create(allowance=0.5), "float"),
        (lambda c: c.wallet_keys.create(max_per_tx="0.0000001"), "6 decimal places"),
        (lambda c: c.wallet_keys.create(budget="-1"), "no sign"),
        (lambda c: c.wallet_keys.create(period="hourly"), "period"),
        (lambda c: c.wallet_keys.create(allowed_hosts="api.example.com"), "list of strings"),
        (lambda c: c.wallet_keys.create(allowed_rails=["x402", ""]), "non-empty"),
        (lambda c: c.wallet_keys.update("vw_1"), "at least one field"),
        (lambda c: c.wallet_keys.update("vw_1", budget=svc.NOT_GIVEN), "at least one field"),
        (lambda c: c.wallet_keys.update("vw_1", allowance=Decimal("-0.01")), "negative"),
        (lambda c: c.wallet_keys.update("vw_1", period=None), "period"),
        (lambda c: c.wallet_keys.update("vw_1", name=None), "name"),
        (lambda c: c.wallet_keys.update("vw_1", allowed_rails="rill"), "list of strings"),
        (lambda c: c.wallet_keys.fund("vw_1", 0), "greater than zero"),
        (lambda c: c.wallet_keys.fund("vw_1", 1.0), "float"),
        (lambda c: c.wallet_keys.refund("vw_1", "-2"), "no sign"),
    ],
)
async def test_bad_policy_and_amounts_fail_locally(twin: Twin, call: Any, match: str) -> None:
    await twin.refuses(twin.client(owner_jwt=OWNER_JWT), call, ValueError, match)


def test_not_given_is_a_falsy_singleton() -> None:
    assert repr(svc.NOT_GIVEN) == "NOT_GIVEN"
    assert not svc.NOT_GIVEN
    assert isinstance(svc.NOT_GIVEN, svc.NotGiven)
    assert copy.deepcopy(svc.NOT_GIVEN) is svc.NOT_GIVEN
    assert pickle.loads(pickle.dumps(svc.NOT_GIVEN)) is svc.NOT_GIVEN  # noqa: S301 - our own bytes


# --- typed results ----------------------------------------------------------------------------


async def test_wallet_key_results_are_typed(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(
        ok(WALLET_KEY_CREATED, status=201),
        ok({"data": [WALLET_KEY_BODY, {**WALLET_KEY_BODY, "id": "vw_2"}], "has_more": False}),
        ok({**WALLET_KEY_BODY, "status": "revoked", "some_future_field": 1}),
    )

    created = await twin.call(client, lambda c: c.wallet_keys.create("research-agent"))
    listed = await twin.call(client, lambda c: c.wallet_keys.list())
    revoked = await twin.call(client, lambda c: c.wallet_keys.revoke("vw_1"))

    assert isinstance(created, svc.WalletKey)
    assert created.key == "svc_vw_test_shown_once"
    assert created.balance == Decimal("0")
    assert isinstance(created.balance, Decimal)
    assert created.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert created.policy == svc.WalletPolicy(
        allowance=Decimal("10"),
        max_per_tx=Decimal("0.5"),
        budget=Decimal("100"),
        period="day",
        allowed_hosts=["api.example.com"],
        allowed_rails=["x402", "rill"],
    )
    assert isinstance(created.policy.max_per_tx, Decimal)
    assert [k.id for k in listed.data] == ["vw_1", "vw_2"]
    assert listed.has_more is False
    assert all(isinstance(k.balance, Decimal) for k in listed.data)
    assert revoked.status == "revoked"


async def test_unlimited_policy_reads_as_none(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    unlimited = {"allowance": None, "max_per_tx": None, "budget": None, "period": "none"}
    twin.reply(ok({**WALLET_KEY_BODY, "policy": unlimited}))

    key = await twin.call(client, lambda c: c.wallet_keys.update("vw_1", allowance=None))

    assert key.policy == svc.WalletPolicy()


async def test_spend_balance_is_typed(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(ok(SPEND_BALANCE))

    balance = await twin.call(client, lambda c: c.spend.balance())

    assert balance.balance == Decimal("24.95")
    assert balance.remaining_allowance == Decimal("9.95")
    assert balance.remaining_budget == Decimal("99.95")
    assert balance.spent_total == Decimal("0.05")
    assert isinstance(balance.remaining_allowance, Decimal)
    assert balance.next_reset_at == datetime(2025, 1, 3, tzinfo=UTC)
    assert balance.policy.period == "day"
    assert balance.policy.allowance == Decimal("10")


async def test_pay_results_are_typed(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(ok(RESOURCE_PAID), ok(TRANSFER))

    paid = await twin.call(client, lambda c: c.pay(resource_id="res_1"))
    sent = await twin.call(client, lambda c: c.pay(destination="@alice", amount=Decimal("1.5")))

    assert paid.receipt_id == "rcpt_1"
    assert paid.rail == "rill"
    assert paid.amount == Decimal("0.05")
    assert isinstance(paid.amount, Decimal)
    assert paid.resource_id == "res_1"
    assert sent.destination == "@alice"
    assert sent.amount == Decimal("1.50")
    assert sent.settlement == "ledger"


async def test_handle_results_are_typed(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, wallet_key=WALLET_KEY)
    twin.reply(ok(HANDLE, status=201), ok(RESOLUTION))

    handle = await twin.call(client, lambda c: c.handles.create("alice"))
    resolved = await twin.call(client, lambda c: c.handles.resolve("alice"))

    assert handle.handle == "@alice"
    assert handle.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert resolved.destination == "@alice"
    assert resolved.environment == "test"
    assert twin.requests[0].headers["authorization"] == f"Bearer {OWNER_JWT}"
    assert twin.requests[1].headers["authorization"] == f"Bearer {WALLET_KEY}"


# --- pay ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "needs resource_id"),
        ({"amount": "1"}, "needs resource_id"),
        ({"destination": "@alice"}, "needs amount"),
        ({"resource_id": "res_1", "destination": "@alice", "amount": "1"}, "not both"),
        ({"resource_id": "res_1", "destination": "@alice"}, "not both"),
        ({"resource_id": "res_1", "amount": "0.05"}, "not both"),
        ({"resource_id": ""}, "non-empty"),
        ({"destination": "", "amount": "1"}, "non-empty"),
        ({"destination": "@alice", "amount": 0.5}, "float"),
        ({"destination": "@alice", "amount": "0"}, "greater than zero"),
        ({"destination": "@alice", "amount": "-1"}, "no sign"),
        ({"destination": "@alice", "amount": "0.0000001"}, "6 decimal places"),
    ],
)
async def test_pay_takes_exactly_one_form(twin: Twin, kwargs: dict[str, Any], match: str) -> None:
    await twin.refuses(
        twin.client(wallet_key=WALLET_KEY), lambda c: c.pay(**kwargs), ValueError, match
    )


async def test_pay_idempotency_key_is_new_per_call_and_reused_on_retry(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(
        ok(RESOURCE_PAID),
        fail(503, "not_ready"),
        ok(TRANSFER),
        ok(TRANSFER),
    )

    await twin.call(client, lambda c: c.pay(resource_id="res_1"))
    await twin.call(client, lambda c: c.pay(destination="@alice", amount="1.5"))
    options = svc.RequestOptions(idempotency_key="payout-2025-01-02")
    await twin.call(client, lambda c: c.pay(destination="@alice", amount="1.5", options=options))

    keys = [r.headers["idempotency-key"] for r in twin.requests]
    assert keys[0] != keys[1]
    assert keys[1] == keys[2]  # the retry after the 503 is the same pay
    assert keys[3] == "payout-2025-01-02"
    assert len(twin.sleeps) == 1


async def test_allowance_exceeded_is_payment_required_with_details(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    details = {"limit": "allowance", "remaining": "0.02", "requested": "0.05"}
    twin.reply(
        fail(
            402,
            "allowance_exceeded",
            "the allowance for this period is spent",
            details=details,
            request_id="req_402",
        )
    )

    error = await twin.raises(
        client, lambda c: c.pay(resource_id="res_1"), svc.PaymentRequiredError
    )
    assert error.status == 402
    assert error.code == "allowance_exceeded"
    assert error.details == details
    assert error.request_id == "req_402"
    assert len(twin.requests) == 1  # a 402 is never retried
    assert twin.sleeps == []


# --- receipts -------------------------------------------------------------------------------


async def test_unknown_receipt_is_valid_false_not_an_error(twin: Twin) -> None:
    client = twin.client()
    twin.reply(ok({"valid": False, "receipt_id": "rcpt_nope"}))

    result = await twin.call(client, lambda c: c.access.verify("rcpt_nope", "res_1"))

    assert isinstance(result, svc.ReceiptVerification)
    assert result.valid is False
    assert result.receipt_id == "rcpt_nope"
    assert result.amount is None
    assert "authorization" not in twin.last.headers  # no seller key: nothing is sent
    assert body_of(twin.last) == {"receipt_id": "rcpt_nope", "resource_id": "res_1"}


async def test_verify_sends_the_seller_key_only_when_there_is_one(twin: Twin) -> None:
    wallet_only = twin.client(owner_jwt=OWNER_JWT, wallet_key=WALLET_KEY)
    seller = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(VERIFIED), ok(VERIFIED), ok(VERIFIED))

    await twin.call(wallet_only, lambda c: c.access.verify("rcpt_1"))
    await twin.call(seller, lambda c: c.access.verify("rcpt_1"))
    options = svc.RequestOptions(seller_key="svc_sk_test_other")
    result = await twin.call(wallet_only, lambda c: c.access.verify("rcpt_1", options=options))

    auth = [r.headers.get("authorization") for r in twin.requests]
    assert auth == [None, f"Bearer {SELLER_KEY}", "Bearer svc_sk_test_other"]
    assert result.valid is True
    assert result.amount == Decimal("0.05")
    assert result.metadata is not None
    assert result.metadata.credits == Decimal(100)


async def test_verify_seller_key_from_environment_variable(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SVC_SELLER_KEY", "svc_sk_test_from_env")
    client = twin.client()
    twin.reply(ok(VERIFIED))

    await twin.call(client, lambda c: c.access.verify("rcpt_1"))

    assert twin.last.headers["authorization"] == "Bearer svc_sk_test_from_env"

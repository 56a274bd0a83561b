"""``spend.pay_url`` and ``spend.attempts`` on both clients, against a scripted transport
answering with the server's contract."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from sdk_support import WALLET_KEY, Twin, check_request, fail, ok

import svc

pytestmark = pytest.mark.anyio

PAID = {
    "attempt_id": "att_1",
    "status": "succeeded",
    "rail": "x402",
    "amount": "0.25",
    "receipt_id": "rcpt_1",
    "tx_hash": "0x" + "ab" * 32,
    "network": "eip155:84532",
    "pay_to": "0x" + "12" * 20,
    "unlocked": True,
    "upstream_status": 200,
    "body": '{"report":"the goods"}',
    "body_encoding": "utf-8",
    "body_truncated": False,
    "headers": {"content-type": "application/json"},
}
ATTEMPTS = {
    "data": [
        {
            "id": "att_2",
            "status": "failed",
            "url": "https://api.example.com/free",
            "method": "GET",
            "host": "api.example.com",
            "upstream_status": 200,
            "error": {"code": "not_payable", "message": "nothing to pay"},
            "created_at": "2026-11-22T02:00:00+00:00",
            "updated_at": "2026-11-22T02:00:01+00:00",
        },
        {"id": "att_1", "status": "succeeded", "rail": "x402", "amount": "0.25"},
    ],
    "has_more": True,
}


async def test_pay_url_sends_the_url_and_reads_the_result(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(ok(PAID))

    paid = await twin.call(client, lambda c: c.spend.pay_url("https://api.example.com/report"))

    body = {"url": "https://api.example.com/report", "method": "GET"}
    check_request(twin.last, "POST /spend/pay-url", "wallet", body)
    assert isinstance(paid, svc.PayUrlResult)
    assert (paid.attempt_id, paid.rail, paid.amount) == ("att_1", "x402", Decimal("0.25"))
    assert paid.content == b'{"report":"the goods"}' and paid.unlocked is True
    assert paid.headers == {"content-type": "application/json"}
    assert paid.request_id == "req_ok"


async def test_pay_url_posts_a_json_body(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(ok(PAID))

    await twin.call(
        client,
        lambda c: c.spend.pay_url("https://x.example/q", method="POST", json={"q": [1, "a"]}),
    )

    body = {"url": "https://x.example/q", "method": "POST", "json": {"q": [1, "a"]}}
    check_request(twin.last, "POST /spend/pay-url", "wallet", body)


async def test_a_base64_body_reads_back_as_bytes(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    raw = bytes(range(256))
    twin.reply(ok({**PAID, "body": base64.b64encode(raw).decode(), "body_encoding": "base64"}))

    paid = await twin.call(client, lambda c: c.spend.pay_url("https://x.example/bin"))

    assert paid.content == raw


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"url": ""}, "url"),
        ({"url": "https://x.example", "method": "PUT"}, "method"),
        ({"url": "https://x.example", "json": {"a": 1}}, "POST"),
    ],
)
async def test_bad_arguments_fail_before_sending(
    twin: Twin, kwargs: dict[str, Any], match: str
) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    rest = {k: v for k, v in kwargs.items() if k != "url"}
    await twin.refuses(client, lambda c: c.spend.pay_url(kwargs["url"], **rest), ValueError, match)


async def test_a_retried_pay_url_reuses_its_idempotency_key(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(fail(502, "upstream_unavailable"), ok(PAID))

    await twin.call(client, lambda c: c.spend.pay_url("https://x.example/r"))

    first, retry = twin.requests
    assert first.headers["idempotency-key"] == retry.headers["idempotency-key"]


@pytest.mark.parametrize(
    ("status", "code", "error_class"),
    [
        (422, "not_payable", svc.UnprocessableEntityError),
        (422, "unsupported_challenge", svc.UnprocessableEntityError),
        (402, "max_per_tx_exceeded", svc.PaymentRequiredError),
    ],
)
async def test_refusals_carry_the_attempt_id(
    twin: Twin, status: int, code: str, error_class: type[svc.APIError]
) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(fail(status, code, details={"attempt_id": "att_9"}, request_id="req_9"))

    error = await twin.raises(client, lambda c: c.spend.pay_url("https://x.example/r"), error_class)

    assert error.code == code and error.request_id == "req_9"
    assert error.details == {"attempt_id": "att_9"}
    assert len(twin.requests) == 1


async def test_attempts_are_listed_and_paged(twin: Twin) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    twin.reply(ok(ATTEMPTS), ok({"data": [], "has_more": False}))

    page = await twin.call(client, lambda c: c.spend.attempts(limit=2))
    await twin.call(client, lambda c: c.spend.attempts(starting_after="att_1"))

    first, second = twin.requests
    check_request(first, "GET /spend/attempts?limit=2", "wallet", None)
    assert dict(second.url.params) == {"starting_after": "att_1"}
    assert isinstance(page, svc.SpendAttemptList) and page.has_more is True
    failed, succeeded = page.data
    assert isinstance(failed, svc.SpendAttempt)
    assert failed.error == svc.ErrorDetail(code="not_payable", message="nothing to pay")
    assert failed.created_at == datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    assert (succeeded.rail, succeeded.amount, succeeded.error) == ("x402", Decimal("0.25"), None)


@pytest.mark.parametrize("limit", [0, 101, True])
async def test_attempts_limit_is_checked_locally(twin: Twin, limit: Any) -> None:
    client = twin.client(wallet_key=WALLET_KEY)
    await twin.refuses(client, lambda c: c.spend.attempts(limit=limit), ValueError, "limit")

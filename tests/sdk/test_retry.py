"""The retry policy on its own, then the retry loop of both client twins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from sdk_support import OWNER_JWT, SELLER_KEY, Twin, fail, ok

import svc
from svc._errors import error_for_status
from svc._retry import RetryPolicy, parse_retry_after

pytestmark = pytest.mark.anyio

SELLER = {"id": "sel_1", "environment": "test", "seller_key": "svc_sk_test_new"}
FIXED = RetryPolicy(random=lambda: 1.0)  # no jitter: delays are exactly the backoff


def _api_error(status: int, code: str = "x", headers: dict[str, str] | None = None) -> svc.APIError:
    return error_for_status(status)("m", status=status, code=code, headers=headers)


# --- the policy -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "retryable"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (httpx.WriteError("reset"), True),
        (httpx.RemoteProtocolError("closed"), True),
        (httpx.UnsupportedProtocol("gopher://"), False),
        (httpx.DecodingError("bad gzip"), False),
        (ValueError("not http"), False),
        (_api_error(409, "idempotency_in_progress"), True),
        (_api_error(409, "conflict"), False),
        (_api_error(429, "rate_limited"), True),
        (_api_error(500), True),
        (_api_error(502), True),
        (_api_error(503, "not_ready"), True),
        (_api_error(504), True),
        (_api_error(501), False),
        (_api_error(400, "invalid_json"), False),
        (_api_error(401, "unauthenticated"), False),
        (_api_error(402), False),
        (_api_error(403, "environment_mismatch"), False),
        (_api_error(404, "not_found"), False),
        (_api_error(422, "validation_error"), False),
        (_api_error(422, "idempotency_key_reused"), False),
    ],
    ids=lambda v: v if isinstance(v, bool) else f"{type(v).__name__}:{getattr(v, 'code', v)}",
)
def test_which_failures_are_retried(failure: BaseException, retryable: bool) -> None:
    assert RetryPolicy().is_retryable(failure) is retryable
    expected = None if not retryable else FIXED.backoff(0)
    assert FIXED.next_delay(0, failure) == expected


def test_backoff_doubles_and_caps() -> None:
    assert [FIXED.backoff(n) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_jitter_stays_between_half_and_full_delay() -> None:
    low = RetryPolicy(random=lambda: 0.0)
    assert [low.backoff(n) for n in range(5)] == [0.25, 0.5, 1.0, 2.0, 4.0]
    default = RetryPolicy()
    for n in range(6):
        base = min(0.5 * 2**n, 8.0)
        assert all(base / 2 <= default.backoff(n) <= base for _ in range(50))


def test_gives_up_after_max_retries() -> None:
    policy = RetryPolicy(max_retries=2, random=lambda: 1.0)
    error = _api_error(503)
    assert [policy.next_delay(n, error) for n in range(3)] == [0.5, 1.0, None]
    assert RetryPolicy(max_retries=0).next_delay(0, error) is None


def test_max_retries_must_be_a_non_negative_integer() -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="max_retries"):
            RetryPolicy(max_retries=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="max_retries"):
            svc.Client(max_retries=bad)  # type: ignore[arg-type]


def test_client_max_retries_and_retry_policy_combine() -> None:
    assert svc.Client().max_retries == 2
    assert svc.Client(retry_policy=RetryPolicy(max_retries=4)).max_retries == 4
    assert svc.Client(max_retries=1, retry_policy=RetryPolicy(max_retries=4)).max_retries == 1


def test_retry_after_wins_over_backoff_and_is_capped() -> None:
    assert FIXED.next_delay(0, _api_error(429, headers={"retry-after": "3"})) == 3.0
    assert FIXED.next_delay(1, _api_error(503, headers={"retry-after": "0"})) == 0.0
    assert FIXED.next_delay(0, _api_error(429, headers={"retry-after": "3600"})) == 60.0
    # Retry-After does not make a non-retryable failure retryable.
    assert FIXED.next_delay(0, _api_error(400, headers={"retry-after": "1"})) is None


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after": " 10 "}) == 10.0
    assert parse_retry_after({}) is None
    for bad in ("-1", "nan", "inf", "soon"):
        assert parse_retry_after({"retry-after": bad}) is None
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": future}) or 0) <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


# --- the loop, on both twins ----------------------------------------------------------------


async def test_connection_error_then_success_reuses_the_idempotency_key(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, retry_policy=FIXED)
    twin.reply(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ok(SELLER, status=201))

    seller = await twin.call(client, lambda c: c.sellers.create(name="Shop"))

    assert seller.seller_key == "svc_sk_test_new"
    assert twin.sleeps == [0.5, 1.0]
    keys = {r.headers["idempotency-key"] for r in twin.requests}
    assert len(twin.requests) == 3
    assert len(keys) == 1
    assert all(r.content == b'{"name":"Shop"}' for r in twin.requests)


async def test_503_then_success(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY, retry_policy=FIXED)
    twin.reply(fail(503, "not_ready"), ok({"id": "sel_1", "environment": "test"}))

    seller = await twin.call(client, lambda c: c.sellers.me())

    assert seller.id == "sel_1"
    assert twin.sleeps == [0.5]
    assert all("idempotency-key" not in r.headers for r in twin.requests)


async def test_jittered_delays_by_default(twin: Twin) -> None:
    client = twin.client()
    twin.reply(httpx.Response(502), httpx.Response(504), ok({"status": "ok"}))

    await twin.call(client, lambda c: c.health())

    first, second = twin.sleeps
    assert 0.25 <= first <= 0.5
    assert 0.5 <= second <= 1.0


async def test_429_honours_retry_after(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY, retry_policy=FIXED)
    twin.reply(
        fail(429, "rate_limited", headers={"Retry-After": "3"}),
        fail(429, "rate_limited", headers={"Retry-After": "120"}),
        ok({"id": "sel_1", "environment": "test"}),
    )

    await twin.call(client, lambda c: c.sellers.me())

    assert twin.sleeps == [3.0, 60.0]


async def test_429_without_retry_after_backs_off(twin: Twin) -> None:
    client = twin.client(retry_policy=FIXED)
    twin.reply(fail(429, "rate_limited"), ok({"status": "ok"}))

    await twin.call(client, lambda c: c.health())

    assert twin.sleeps == [0.5]


async def test_409_idempotency_in_progress_is_retried_with_the_same_key(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY, retry_policy=FIXED)
    resource = {
        "id": "res_1",
        "short_id": "r1",
        "kind": "http",
        "amount": "1.00",
        "gate_url": "g",
        "pay_url": "p",
        "path_or_tool": "/a",
    }
    twin.reply(fail(409, "idempotency_in_progress"), ok(resource))

    result = await twin.call(client, lambda c: c.resources.update("res_1", amount="1"))

    assert result.id == "res_1"
    first, second = twin.requests
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert twin.sleeps == [0.5]


@pytest.mark.parametrize(
    ("status", "code", "error_type"),
    [
        (400, "invalid_json", svc.BadRequestError),
        (401, "unauthenticated", svc.AuthenticationError),
        (404, "not_found", svc.NotFoundError),
        (409, "conflict", svc.ConflictError),
        (422, "validation_error", svc.UnprocessableEntityError),
        (422, "idempotency_key_reused", svc.UnprocessableEntityError),
    ],
)
async def test_client_errors_are_not_retried(
    twin: Twin, status: int, code: str, error_type: type[svc.APIError]
) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(fail(status, code))

    await twin.raises(client, lambda c: c.sellers.create(name="x"), error_type)

    assert len(twin.requests) == 1
    assert twin.sleeps == []


async def test_exhausted_retries_raise_the_last_error(twin: Twin) -> None:
    client = twin.client(retry_policy=FIXED)
    twin.reply(
        fail(503, "not_ready", request_id="req_1"),
        httpx.Response(502, text="bad gateway"),
        fail(500, "internal_error", request_id="req_3"),
    )

    error = await twin.raises(client, lambda c: c.ready(), svc.ServerError)

    assert error.status == 500
    assert error.request_id == "req_3"
    assert len(twin.requests) == 3  # one try plus max_retries=2
    assert twin.sleeps == [0.5, 1.0]


async def test_exhausted_connection_retries_raise_a_chained_connection_error(twin: Twin) -> None:
    client = twin.client(max_retries=1, retry_policy=FIXED)
    last = httpx.ConnectTimeout("connect timed out")
    twin.reply(httpx.ConnectError("refused"), last)

    error = await twin.raises(client, lambda c: c.health(), svc.APITimeoutError)

    assert error.__cause__ is last
    assert twin.sleeps == [0.5]


async def test_max_retries_per_request_overrides_the_client(twin: Twin) -> None:
    client = twin.client(max_retries=5, retry_policy=FIXED)
    twin.reply(httpx.Response(503), httpx.Response(503), ok({"status": "ok"}))

    with pytest.raises(svc.ServerError):
        await twin.call(client, lambda c: c.health(options=svc.RequestOptions(max_retries=0)))
    assert len(twin.requests) == 1

    options = svc.RequestOptions(max_retries=1)
    health = await twin.call(client, lambda c: c.health(options=options))
    assert health.status == "ok"
    assert len(twin.requests) == 3


async def test_client_max_retries_zero_disables_retries(twin: Twin) -> None:
    client = twin.client(max_retries=0)
    twin.reply(httpx.ConnectError("refused"))

    await twin.raises(client, lambda c: c.health(), svc.APIConnectionError)
    assert twin.sleeps == []


async def test_unsupported_protocol_is_not_retried(twin: Twin) -> None:
    client = twin.client()
    twin.reply(httpx.UnsupportedProtocol("no"))

    await twin.raises(client, lambda c: c.health(), svc.APIConnectionError)
    assert len(twin.requests) == 1

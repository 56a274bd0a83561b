"""Behaviour shared by ``svc.Client`` and ``svc.AsyncClient``.

Every scenario here runs on both twins through the ``twin`` fixture (see conftest), plus a
few constructor/lifecycle checks of the sync client.  Retries are in ``test_retry.py``;
async-only behaviour in ``test_async_client.py``.
"""

from __future__ import annotations

from collections.abc import Callable
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
    body_of,
    check_request,
    fail,
    ok,
)

import svc
from svc._spec import RequestSpec, as_json_object

pytestmark = pytest.mark.anyio

SELLER = {
    "id": "sel_1",
    "environment": "test",
    "mpp_enabled": True,
    "x402_enabled": True,
    "balance": "12.50",
    "name": "Shop",
}
RESOURCE = {
    "id": "res_1",
    "short_id": "r1",
    "kind": "http",
    "amount": "0.05",
    "gate_url": "http://127.0.0.1:8000/g/r1",
    "pay_url": "http://127.0.0.1:8000/p/r1",
    "path_or_tool": "/v1/report",
    "path": "/v1/report",
    "metadata": {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "call", "tier": "gold"},
}
HEALTH = {"status": "ok"}
BODIES: dict[type, dict[str, Any]] = {
    svc.OwnerCreated: {"owner_id": "own_1", "owner_jwt": "jwt"},
    svc.SellerCreated: {**SELLER, "seller_key": "svc_sk_test_new"},
    svc.Seller: SELLER,
    svc.SellerList: {"data": [SELLER], "has_more": False},
    svc.Balance: {"seller_id": "sel_1", "environment": "test", "balance": "12.345678"},
    svc.Resource: RESOURCE,
    svc.ResourceList: {"data": [RESOURCE, RESOURCE], "has_more": False},
    svc.Health: HEALTH,
    svc.Capabilities: {"auth_modes": [{"role": "seller"}], "pay_shapes": [{"rail": "x402"}]},
}

# (call, "METHOD /path", role, JSON body or None, result type)
ENDPOINTS: list[tuple[Any, str, str | None, dict[str, Any] | None, type]] = [
    (
        lambda c: c.owners.create("a@example.com"),
        "POST /owners",
        None,
        {"email": "a@example.com"},
        svc.OwnerCreated,
    ),
    (lambda c: c.sellers.create(), "POST /sellers", "owner", {}, svc.SellerCreated),
    (
        lambda c: c.sellers.create(name="Shop"),
        "POST /sellers",
        "owner",
        {"name": "Shop"},
        svc.SellerCreated,
    ),
    (lambda c: c.sellers.list(), "GET /sellers", "owner", None, svc.SellerList),
    (lambda c: c.sellers.me(), "GET /sellers/me", "seller", None, svc.Seller),
    (
        lambda c: c.sellers.enable_payments(payout_wallet_address="0xabc"),
        "PATCH /sellers/me/payments",
        "seller",
        {"payout_wallet_address": "0xabc"},
        svc.Seller,
    ),
    (lambda c: c.sellers.balance(), "GET /sellers/me/balance", "seller", None, svc.Balance),
    (
        lambda c: c.resources.create(
            kind="http", path="/v1/report", amount="0.05", upstream_url="https://up.example"
        ),
        "POST /resources",
        "seller",
        {
            "kind": "http",
            "path": "/v1/report",
            "amount": "0.05",
            "upstream_url": "https://up.example",
        },
        svc.Resource,
    ),
    (
        lambda c: c.resources.create(
            kind="mcp", tool="search", amount=Decimal("0.250"), description="d", listed=True
        ),
        "POST /resources",
        "seller",
        {"kind": "mcp", "tool": "search", "amount": "0.25", "description": "d", "listed": True},
        svc.Resource,
    ),
    (lambda c: c.resources.list(), "GET /resources", "seller", None, svc.ResourceList),
    (lambda c: c.resources.get("res_1"), "GET /resources/res_1", "seller", None, svc.Resource),
    (
        lambda c: c.resources.update("res_1", amount=2, active=False, path="/v2"),
        "PATCH /resources/res_1",
        "seller",
        {"amount": "2.00", "active": False, "path": "/v2"},
        svc.Resource,
    ),
    (
        lambda c: c.resources.deactivate("res_1"),
        "POST /resources/res_1/deactivate",
        "seller",
        {},
        svc.Resource,
    ),
    (lambda c: c.health(), "GET /health", None, None, svc.Health),
    (lambda c: c.ready(), "GET /ready", None, None, svc.Health),
    (lambda c: c.capabilities(), "GET /agent/capabilities", None, None, svc.Capabilities),
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
    client = twin.client(**ALL_CREDENTIALS)
    twin.reply(ok(BODIES[result_type], status=201 if route.startswith("POST") else 200))

    result = await twin.call(client, call)

    assert isinstance(result, result_type)
    check_request(twin.last, route, role, body)  # and no environment header
    assert twin.last.url.host == "127.0.0.1"
    assert twin.last.headers["user-agent"] == f"svc-python/{svc.__version__}"


async def test_idempotency_key_is_new_per_call_and_taken_from_options(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(*(ok(BODIES[svc.SellerCreated]) for _ in range(3)))

    await twin.call(client, lambda c: c.sellers.create())
    await twin.call(client, lambda c: c.sellers.create())
    options = svc.RequestOptions(idempotency_key="my-key-1")
    await twin.call(client, lambda c: c.sellers.create(options=options))

    keys = [r.headers["idempotency-key"] for r in twin.requests]
    assert keys[0] != keys[1]
    assert keys[2] == "my-key-1"


async def test_discovery_documents(twin: Twin) -> None:
    client = twin.client()
    twin.reply(
        httpx.Response(200, text="# svc\n> pay things\n"),
        httpx.Response(200, json={"name": "svc", "skills": []}),
        httpx.Response(200, text="full"),
        httpx.Response(200, json={"openapi": "3.1.0"}),
    )

    assert await twin.call(client, lambda c: c.discovery("llms.txt")) == "# svc\n> pay things\n"
    assert await twin.call(client, lambda c: c.discovery(".well-known/agent.json")) == {
        "name": "svc",
        "skills": [],
    }
    assert await twin.call(client, lambda c: c.discovery("/llms-full.txt")) == "full"
    assert await twin.call(client, lambda c: c.discovery("agent-openapi.json")) == {
        "openapi": "3.1.0"
    }
    paths = [r.url.path for r in twin.requests]
    assert paths == [
        "/llms.txt",
        "/.well-known/agent.json",
        "/llms-full.txt",
        "/agent-openapi.json",
    ]
    assert all("authorization" not in r.headers for r in twin.requests)


async def test_discovery_rejects_unknown_document(twin: Twin) -> None:
    client = twin.client()
    await twin.refuses(
        client, lambda c: c.discovery("secrets.txt"), ValueError, "unknown discovery document"
    )


async def test_path_parameters_are_percent_encoded(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(RESOURCE))

    await twin.call(client, lambda c: c.resources.get("../sellers/me"))

    assert twin.last.url.raw_path == b"/resources/..%2Fsellers%2Fme"


async def test_empty_id_is_refused_before_sending(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    await twin.refuses(client, lambda c: c.resources.deactivate(""), ValueError, "non-empty")


async def test_base_url_keeps_its_path_prefix(twin: Twin) -> None:
    client = twin.client(base_url="https://api.example.com/api/")
    twin.reply(ok(HEALTH))

    await twin.call(client, lambda c: c.health())

    assert str(twin.last.url) == "https://api.example.com/api/health"


# --- configuration: environment variables, environment, credentials -----------------------


async def test_configuration_comes_from_environment_variables(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SVC_BASE_URL", "https://svc.example.com")
    monkeypatch.setenv("SVC_SELLER_KEY", "svc_sk_test_from_env")
    monkeypatch.setenv("SVC_ENVIRONMENT", "test")
    client = twin.client()
    twin.reply(ok(SELLER))

    await twin.call(client, lambda c: c.sellers.me())

    assert client.base_url == "https://svc.example.com"
    assert str(twin.last.url) == "https://svc.example.com/sellers/me"
    assert twin.last.headers["authorization"] == "Bearer svc_sk_test_from_env"
    assert twin.last.headers["x-svc-environment"] == "test"


async def test_arguments_win_over_environment_variables(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SVC_SELLER_KEY", "svc_sk_test_from_env")
    monkeypatch.setenv("SVC_ENVIRONMENT", "test")
    client = twin.client(seller_key="svc_sk_live_arg", environment="live")
    twin.reply(ok(SELLER))

    await twin.call(client, lambda c: c.sellers.me())

    assert twin.last.headers["authorization"] == "Bearer svc_sk_live_arg"
    assert twin.last.headers["x-svc-environment"] == "live"


@pytest.mark.parametrize(
    ("call", "needs"),
    [
        (lambda c: c.sellers.list(), "SVC_OWNER_JWT"),
        (lambda c: c.sellers.create(name="x"), "SVC_OWNER_JWT"),
        (lambda c: c.sellers.me(), "SVC_SELLER_KEY"),
        (lambda c: c.resources.create(kind="http", path="/a", amount="1"), "SVC_SELLER_KEY"),
        (
            lambda c: c._request(
                RequestSpec(
                    method="GET", path="/spend/balance", role="wallet", parse=as_json_object
                )
            ),
            "SVC_WALLET_KEY",
        ),
    ],
)
async def test_missing_credential_fails_before_any_request(
    twin: Twin, call: Any, needs: str
) -> None:
    # no credentials at all
    await twin.refuses(twin.client(), call, svc.ConfigurationError, needs)


async def test_a_credential_for_another_role_does_not_stand_in(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, wallet_key=WALLET_KEY)
    await twin.refuses(client, lambda c: c.sellers.balance(), svc.ConfigurationError, "seller")


async def test_invalid_environment_is_a_configuration_error(twin: Twin) -> None:
    with pytest.raises(svc.ConfigurationError, match="environment"):
        twin.client(environment="staging")

    client = twin.client()
    options = svc.RequestOptions(environment="prod")  # type: ignore[arg-type]
    with pytest.raises(svc.ConfigurationError, match="environment"):
        await twin.call(client, lambda c: c.health(options=options))
    assert twin.requests == []


# --- per-request options ------------------------------------------------------------------


async def test_request_options_override_client_defaults(twin: Twin) -> None:
    client = twin.client(
        seller_key=SELLER_KEY,
        environment="live",
        timeout=30.0,
        default_headers={"X-Team": "payments", "X-Trace": "client"},
    )
    twin.reply(ok(SELLER), ok(SELLER))
    options = svc.RequestOptions(
        seller_key="svc_sk_test_other",
        environment="test",
        timeout=2.5,
        extra_headers={"x-trace": "call", "Idempotency-Key": "from-extra-headers"},
    )

    await twin.call(client, lambda c: c.sellers.me(options=options))
    await twin.call(client, lambda c: c.sellers.me())

    first, second = twin.requests
    assert first.headers["authorization"] == "Bearer svc_sk_test_other"
    assert first.headers["x-svc-environment"] == "test"
    assert first.headers["x-team"] == "payments"
    assert first.headers.get_list("x-trace") == ["call"]
    assert first.headers["idempotency-key"] == "from-extra-headers"
    assert first.extensions["timeout"] == httpx.Timeout(2.5).as_dict()
    # Options are per call: the next call is back on the client's defaults.
    assert second.headers["authorization"] == f"Bearer {SELLER_KEY}"
    assert second.headers["x-svc-environment"] == "live"
    assert second.headers["x-trace"] == "client"
    assert second.extensions["timeout"] == httpx.Timeout(30.0).as_dict()


async def test_options_supply_a_credential_the_client_lacks(twin: Twin) -> None:
    client = twin.client()
    twin.reply(ok(BODIES[svc.SellerList]))

    options = svc.RequestOptions(owner_jwt="other.jwt")
    result = await twin.call(client, lambda c: c.sellers.list(options=options))

    assert [s.id for s in result.data] == ["sel_1"]
    assert twin.last.headers["authorization"] == "Bearer other.jwt"


def test_request_options_merge_and_hide_secrets() -> None:
    defaults = svc.RequestOptions(
        max_retries=2, seller_key="svc_sk_secret", extra_headers={"A": "1"}
    )
    merged = svc.RequestOptions(max_retries=0, extra_headers={"B": "2"}).merged_over(defaults)

    assert merged.max_retries == 0
    assert merged.seller_key == "svc_sk_secret"
    assert merged.extra_headers == {"A": "1", "B": "2"}
    assert "svc_sk_secret" not in repr(merged)
    with pytest.raises(ValueError, match="max_retries"):
        svc.RequestOptions(max_retries=-1)


# --- responses ----------------------------------------------------------------------------


async def test_unknown_fields_are_tolerated_and_amounts_are_decimals(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    body = {**RESOURCE, "amount": "0.123456", "brand_new_field": {"x": 1}, "created_at": None}
    twin.reply(ok(body), ok({**BODIES[svc.Balance], "future": True}))

    resource = await twin.call(client, lambda c: c.resources.get("res_1"))
    balance = await twin.call(client, lambda c: c.sellers.balance())

    assert resource.amount == Decimal("0.123456")
    assert isinstance(resource.amount, Decimal)
    assert resource.metadata.sku_kind == "credit_topup"
    assert resource.metadata.credits == Decimal(100)
    assert resource.metadata.extra == {"tier": "gold"}
    assert resource.request_id == "req_ok"
    assert balance.balance == Decimal("12.345678")


async def test_success_request_id_falls_back_to_header(twin: Twin) -> None:
    client = twin.client()
    twin.reply(
        httpx.Response(200, json={"ok": True, "status": "ok"}, headers={"X-Request-Id": "h1"})
    )

    health = await twin.call(client, lambda c: c.health())

    assert health.request_id == "h1"


@pytest.mark.parametrize(
    ("amount", "wire"),
    [(Decimal("0.05"), "0.05"), ("1.5", "1.50"), (3, "3.00"), ("0.000001", "0.000001")],
)
async def test_amount_inputs_are_sent_as_decimal_strings(
    twin: Twin, amount: Any, wire: str
) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(RESOURCE))

    await twin.call(client, lambda c: c.resources.create(kind="http", path="/a", amount=amount))

    assert body_of(twin.last)["amount"] == wire


@pytest.mark.parametrize("amount", [0.05, "0.0000001", "abc", True, Decimal("NaN")])
async def test_bad_amounts_fail_locally(twin: Twin, amount: Any) -> None:
    client = twin.client(seller_key=SELLER_KEY)

    with pytest.raises(ValueError):
        await twin.call(client, lambda c: c.resources.create(kind="http", path="/a", amount=amount))
    with pytest.raises(ValueError):
        await twin.call(client, lambda c: c.resources.update("res_1", amount=amount))
    assert twin.requests == []


async def test_metadata_accepts_a_model_or_a_dict(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(RESOURCE), ok(RESOURCE))
    model = svc.ResourceMetadata(
        sku_kind="credit_topup", credits=Decimal(50), extra={"tier": "gold"}
    )

    await twin.call(
        client, lambda c: c.resources.create(kind="http", path="/a", amount="1", metadata=model)
    )
    await twin.call(
        client,
        lambda c: c.resources.update(
            "res_1", metadata={"sku_kind": "one_shot", "n": Decimal("1.5")}
        ),
    )

    first, second = (body_of(r)["metadata"] for r in twin.requests)
    assert first == {"tier": "gold", "sku_kind": "credit_topup", "credits": 50}
    assert second == {"sku_kind": "one_shot", "n": "1.5"}


# --- errors -------------------------------------------------------------------------------

ERROR_CASES = [
    (400, "invalid_json", svc.BadRequestError),
    (400, "bad_request", svc.BadRequestError),
    (401, "unauthenticated", svc.AuthenticationError),
    (402, "payment_required", svc.PaymentRequiredError),
    (403, "forbidden", svc.PermissionDeniedError),
    (403, "wrong_credential", svc.PermissionDeniedError),
    (403, "environment_mismatch", svc.PermissionDeniedError),
    (404, "not_found", svc.NotFoundError),
    (409, "conflict", svc.ConflictError),
    (413, "payload_too_large", svc.APIError),
    (415, "unsupported_media_type", svc.APIError),
    (422, "validation_error", svc.UnprocessableEntityError),
    (422, "idempotency_key_reused", svc.UnprocessableEntityError),
    (429, "rate_limited", svc.RateLimitError),
    (500, "internal_error", svc.ServerError),
    (503, "not_ready", svc.ServerError),
]


@pytest.mark.parametrize(("status", "code", "error_type"), ERROR_CASES)
async def test_error_envelope_maps_to_error_class(
    twin: Twin, status: int, code: str, error_type: type[svc.APIError]
) -> None:
    client = twin.client(seller_key=SELLER_KEY, max_retries=0)
    details = {"field": "amount"}
    twin.reply(fail(status, code, "it went wrong", details=details, request_id="req_42"))

    error = await twin.raises(client, lambda c: c.sellers.me(), error_type)
    assert type(error) is error_type
    assert isinstance(error, svc.SvcError)
    assert error.status == status
    assert error.code == code
    assert error.message == "it went wrong"
    assert error.details == details
    assert error.request_id == "req_42"
    assert error.body["error"]["code"] == code
    assert "req_42" in str(error)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, svc.BadRequestError),
        (401, svc.AuthenticationError),
        (403, svc.PermissionDeniedError),
        (404, svc.NotFoundError),
        (413, svc.APIError),
        (429, svc.RateLimitError),
        (502, svc.ServerError),
        (504, svc.ServerError),
    ],
)
async def test_html_error_body_still_maps(
    twin: Twin, status: int, error_type: type[svc.APIError]
) -> None:
    client = twin.client(max_retries=0)
    html = "<html>\n  <body><h1>Bad   Gateway</h1>  from nginx</body>\n</html>"
    twin.reply(httpx.Response(status, text=html, headers={"Content-Type": "text/html"}))

    error = await twin.raises(client, lambda c: c.health(), error_type)
    assert type(error) is error_type
    assert error.status == status
    assert error.code == error_type.default_code
    assert error.message.startswith(f"HTTP {status} ")
    assert "<h1>Bad Gateway</h1> from nginx" in error.message
    assert error.body == html
    assert error.request_id is None


async def test_empty_error_body_and_request_id_from_header(twin: Twin) -> None:
    client = twin.client(max_retries=0)
    twin.reply(httpx.Response(502, headers={"X-Request-Id": "req_hdr"}))

    error = await twin.raises(client, lambda c: c.health(), svc.ServerError)

    assert error.message == "HTTP 502 Bad Gateway"
    assert error.request_id == "req_hdr"
    assert error.headers["x-request-id"] == "req_hdr"


async def test_request_id_in_body_wins_over_header(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(
        fail(404, "not_found", request_id="req_body", headers={"X-Request-Id": "req_hdr"}),
        fail(404, "not_found", request_id=None, headers={"X-Request-Id": "req_hdr"}),
    )

    for expected in ("req_body", "req_hdr"):
        error = await twin.raises(client, lambda c: c.resources.get("res_x"), svc.NotFoundError)
        assert error.request_id == expected


async def test_rate_limit_error_carries_retry_after(twin: Twin) -> None:
    client = twin.client(max_retries=0)
    twin.reply(fail(429, "rate_limited", headers={"Retry-After": "7", "X-RateLimit-Limit": "10"}))

    error = await twin.raises(client, lambda c: c.health(), svc.RateLimitError)

    assert error.retry_after == 7.0
    assert error.headers["x-ratelimit-limit"] == "10"


@pytest.mark.parametrize(
    "response",
    [
        lambda: httpx.Response(200, text="<html>maintenance</html>"),
        lambda: httpx.Response(200, content=b""),
        lambda: httpx.Response(200, json=["not", "an", "object"]),
        lambda: httpx.Response(200, json={"ok": True, "no_status_field": 1}),
    ],
    ids=["html", "empty", "array", "missing-field"],
)
async def test_unreadable_success_body_is_invalid_response(
    twin: Twin, response: Callable[[], httpx.Response]
) -> None:
    client = twin.client()
    twin.reply(response())

    error = await twin.raises(client, lambda c: c.health(), svc.APIError)

    assert type(error) is svc.APIError
    assert error.code == "invalid_response"
    assert error.status == 200
    assert len(twin.requests) == 1  # a success is never retried


@pytest.mark.parametrize(
    ("exc_type", "error_type"),
    [
        (httpx.ConnectError, svc.APIConnectionError),
        (httpx.ReadTimeout, svc.APITimeoutError),
        (httpx.ConnectTimeout, svc.APITimeoutError),
        (httpx.RemoteProtocolError, svc.APIConnectionError),
    ],
)
async def test_transport_failures_map_to_connection_errors(
    twin: Twin, exc_type: type[httpx.TransportError], error_type: type[svc.APIConnectionError]
) -> None:
    client = twin.client(max_retries=0)
    exc = exc_type("boom")
    twin.reply(exc)

    error = await twin.raises(client, lambda c: c.health(), error_type)

    assert type(error) is error_type
    assert error.__cause__ is exc
    assert "GET http://127.0.0.1:8000/health" in error.message


# --- construction and lifecycle (sync; the async twin is in test_async_client.py) ---------


def test_invalid_base_url_is_a_configuration_error() -> None:
    with pytest.raises(svc.ConfigurationError, match="base_url"):
        svc.Client(base_url="ftp://example.com")
    with pytest.raises(svc.ConfigurationError, match="base_url"):
        svc.Client(base_url="not a url")


def test_transport_and_http_client_are_exclusive() -> None:
    with httpx.Client() as http, pytest.raises(svc.ConfigurationError):
        svc.Client(transport=httpx.MockTransport(lambda r: ok()), http_client=http)


def test_repr_and_properties_never_show_credentials() -> None:
    client = svc.Client(seller_key=SELLER_KEY, owner_jwt=OWNER_JWT, environment="test")
    assert SELLER_KEY not in repr(client)
    assert OWNER_JWT not in repr(client)
    assert client.environment == "test"
    assert client.max_retries == 2
    assert client.base_url == "http://127.0.0.1:8000"
    client.close()


def test_context_manager_closes_its_own_http_client() -> None:
    with svc.Client(transport=httpx.MockTransport(lambda r: ok(HEALTH))) as client:
        client.health()
    assert client._http.is_closed


def test_a_passed_in_http_client_is_left_open() -> None:
    http = httpx.Client(transport=httpx.MockTransport(lambda r: ok(HEALTH)))
    with svc.Client(http_client=http) as client:
        assert client.health().status == "ok"
    assert not http.is_closed
    http.close()

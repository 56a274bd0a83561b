"""Webhook endpoints, the event catalog and the delivery log on both clients.

Every scenario runs on ``svc.Client`` and ``svc.AsyncClient`` through the ``twin`` fixture
(see conftest), against an ``httpx.MockTransport`` answering with the server's contract:
flat JSON bodies with ``ok`` and ``request_id``, lists as ``{"data", "has_more"}``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
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
from svc import _async_namespaces, _namespaces

pytestmark = pytest.mark.anyio

ENDPOINT = {
    "id": "wh_1",
    "url": "https://example.com/svc/webhooks",
    "environment": "test",
    "events": ["payment.succeeded", "transfer.received"],
    "description": "billing",
    "status": "enabled",
    "disabled_reason": None,
    "created_at": "2025-01-02T03:04:05Z",
}
CREATED = {**ENDPOINT, "signing_secret": "whsec_shown_once"}
DELETED = {**ENDPOINT, "status": "deleted"}
CATALOG = {
    "data": [
        {"type": "payment.succeeded", "description": "A payment for a resource settled."},
        {"type": "transfer.received", "description": "A ledger transfer reached a handle."},
    ]
}
ATTEMPT_FAILED = {
    "number": 1,
    "started_at": "2025-01-02T03:04:06Z",
    "duration_ms": 5012,
    "status_code": None,
    "error": "timed out after 5 s",
    "response_body": None,
    "trigger": "schedule",
}
ATTEMPT_OK = {
    "number": 2,
    "started_at": "2025-01-02T03:09:06+00:00",
    "duration_ms": 41,
    "status_code": 204,
    "error": None,
    "response_body": "",
    "trigger": "retry",
}
DELIVERY = {
    "id": "dlv_1",
    "webhook_id": "wh_1",
    "event_id": "evt_1",
    "event_type": "payment.succeeded",
    "status": "succeeded",
    "attempts": 2,
    "last_status_code": 204,
    "last_error": None,
    "next_attempt_at": None,
    "created_at": "2025-01-02T03:04:05Z",
    "delivered_at": "2025-01-02T03:09:06Z",
    "attempt_log": [ATTEMPT_FAILED, ATTEMPT_OK],
}
PENDING = {
    "id": "dlv_2",
    "webhook_id": "wh_1",
    "event_id": "evt_2",
    "event_type": "funding.paid",
    "status": "pending",
    "attempts": 1,
    "last_status_code": 500,
    "last_error": "HTTP 500",
    "next_attempt_at": "2025-01-02T03:35:00Z",
    "created_at": "2025-01-02T03:04:55Z",
    "delivered_at": None,
    "attempt_log": [
        {
            "number": 1,
            "started_at": "2025-01-02T03:05:00Z",
            "duration_ms": 12,
            "status_code": 500,
            "response_body": "oops",
            "trigger": "schedule",
        }
    ],
}
TEST_DELIVERY = {
    **DELIVERY,
    "id": "dlv_test",
    "event_id": "evt_test",
    "attempts": 1,
    "attempt_log": [{**ATTEMPT_OK, "number": 1, "trigger": "test"}],
}
BODIES: dict[type, dict[str, Any]] = {
    svc.WebhookEndpointCreated: CREATED,
    svc.WebhookEndpoint: ENDPOINT,
    svc.WebhookEndpointList: {"data": [ENDPOINT], "has_more": False},
    svc.EventCatalog: CATALOG,
    svc.DeliveryList: {"data": [DELIVERY, PENDING], "has_more": True},
    svc.Delivery: DELIVERY,
}

# (call, "METHOD /path?query", JSON body or None, result type)
ENDPOINTS: list[tuple[Any, str, dict[str, Any] | None, type]] = [
    (
        lambda c: c.webhooks.create(
            "https://example.com/svc/webhooks",
            events=["payment.succeeded", "transfer.received"],
            description="billing",
        ),
        "POST /webhooks",
        {
            "url": "https://example.com/svc/webhooks",
            "events": ["payment.succeeded", "transfer.received"],
            "description": "billing",
        },
        svc.WebhookEndpointCreated,
    ),
    (
        lambda c: c.webhooks.create("https://example.com/svc/webhooks", events=("funding.paid",)),
        "POST /webhooks",
        {"url": "https://example.com/svc/webhooks", "events": ["funding.paid"]},
        svc.WebhookEndpointCreated,
    ),
    (
        lambda c: c.webhooks.create("http://localhost:9000/hook"),
        "POST /webhooks",
        {"url": "http://localhost:9000/hook"},  # events left out: every event
        svc.WebhookEndpointCreated,
    ),
    (lambda c: c.webhooks.list(), "GET /webhooks", None, svc.WebhookEndpointList),
    (lambda c: c.webhooks.events(), "GET /webhooks/events", None, svc.EventCatalog),
    (
        lambda c: c.webhooks.update("wh_1", events=["payment.succeeded"], status="disabled"),
        "PATCH /webhooks/wh_1",
        {"events": ["payment.succeeded"], "status": "disabled"},
        svc.WebhookEndpoint,
    ),
    (
        lambda c: c.webhooks.update("wh_1", events=None),
        "PATCH /webhooks/wh_1",
        {"events": None},
        svc.WebhookEndpoint,
    ),
    (lambda c: c.webhooks.delete("wh_1"), "DELETE /webhooks/wh_1", None, svc.WebhookEndpoint),
    (
        lambda c: c.webhooks.deliveries("wh_1"),
        "GET /webhooks/wh_1/deliveries",
        None,
        svc.DeliveryList,
    ),
    (
        lambda c: c.webhooks.deliveries("wh_1", limit=10),
        "GET /webhooks/wh_1/deliveries?limit=10",
        None,
        svc.DeliveryList,
    ),
    (lambda c: c.webhooks.test("wh_1"), "POST /webhooks/wh_1/test", {}, svc.Delivery),
    (
        lambda c: c.webhooks.retry("wh_1", "dlv_1"),
        "POST /webhooks/wh_1/deliveries/dlv_1/retry",
        {},
        svc.Delivery,
    ),
]


# --- request shape ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "route", "body", "result_type"),
    ENDPOINTS,
    ids=[r + (f" {b}" if b else "") for _, r, b, *_ in ENDPOINTS],
)
async def test_endpoint_request_shape(
    twin: Twin,
    call: Any,
    route: str,
    body: dict[str, Any] | None,
    result_type: type,
) -> None:
    client = twin.client(environment="test", **ALL_CREDENTIALS)
    twin.reply(ok(BODIES[result_type], status=201 if route == "POST /webhooks" else 200))

    result = await twin.call(client, call)

    assert type(result) is result_type
    assert result.request_id == "req_ok"
    check_request(twin.last, route, "owner", body, "test")  # every route: owner


async def test_create_always_sends_an_idempotency_key_reused_on_retry(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(
        fail(503, "not_ready"),
        ok(CREATED, status=201),
        ok(CREATED, status=201),
    )

    await twin.call(client, lambda c: c.webhooks.create("https://example.com/h"))
    options = svc.RequestOptions(idempotency_key="register-hook-1")
    await twin.call(client, lambda c: c.webhooks.create("https://example.com/h", options=options))

    keys = [r.headers["idempotency-key"] for r in twin.requests]
    assert keys[0] == keys[1]  # the retry after the 503 registers the same endpoint once
    assert keys[2] == "register-hook-1"
    assert len(twin.sleeps) == 1


async def test_environment_header_follows_the_client_and_the_call(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, environment="live")
    twin.reply(ok(BODIES[svc.WebhookEndpointList]), ok(BODIES[svc.WebhookEndpointList]))

    await twin.call(client, lambda c: c.webhooks.list())
    options = svc.RequestOptions(environment="test")
    await twin.call(client, lambda c: c.webhooks.list(options=options))

    assert [r.headers["x-svc-environment"] for r in twin.requests] == ["live", "test"]


async def test_without_environment_no_header_is_sent(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(CATALOG))

    await twin.call(client, lambda c: c.webhooks.events())

    assert "x-svc-environment" not in twin.last.headers  # the service then means live


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.webhooks.create("https://example.com/h"),
        lambda c: c.webhooks.list(),
        lambda c: c.webhooks.events(),
        lambda c: c.webhooks.update("wh_1", status="enabled"),
        lambda c: c.webhooks.delete("wh_1"),
        lambda c: c.webhooks.deliveries("wh_1"),
        lambda c: c.webhooks.test("wh_1"),
        lambda c: c.webhooks.retry("wh_1", "dlv_1"),
    ],
)
async def test_every_route_needs_the_owner_jwt(twin: Twin, call: Any) -> None:
    client = twin.client(seller_key=SELLER_KEY, wallet_key=WALLET_KEY)
    await twin.refuses(client, call, svc.ConfigurationError, "SVC_OWNER_JWT")


async def test_path_parameters_are_percent_encoded(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(DELIVERY), ok(ENDPOINT))

    await twin.call(client, lambda c: c.webhooks.retry("../wh_2", "dlv/1?x"))
    await twin.call(client, lambda c: c.webhooks.delete("wh 1"))

    assert [r.url.raw_path for r in twin.requests] == [
        b"/webhooks/..%2Fwh_2/deliveries/dlv%2F1%3Fx/retry",
        b"/webhooks/wh%201",
    ]


# --- update: given, omitted, null -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "wire"),
    [
        ({"events": None}, b'{"events":null}'),
        ({"events": ["vw.revoked"]}, b'{"events":["vw.revoked"]}'),
        ({"description": "ops"}, b'{"description":"ops"}'),
        ({"description": ""}, b'{"description":""}'),
        ({"status": "enabled"}, b'{"status":"enabled"}'),
        (
            {"events": None, "description": "all of them", "status": "enabled"},
            b'{"events":null,"description":"all of them","status":"enabled"}',
        ),
        ({"events": svc.NOT_GIVEN, "status": "disabled"}, b'{"status":"disabled"}'),
    ],
    ids=[
        "events-null",
        "events-list",
        "description",
        "clear-description",
        "status",
        "all",
        "explicit-not-given",
    ],
)
async def test_update_sends_null_for_none_and_omits_what_is_not_given(
    twin: Twin, kwargs: dict[str, Any], wire: bytes
) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(ENDPOINT))

    result = await twin.call(client, lambda c: c.webhooks.update("wh_1", **kwargs))

    assert isinstance(result, svc.WebhookEndpoint)
    check_request(twin.last, "PATCH /webhooks/wh_1", "owner", json.loads(wire))
    assert twin.last.content == wire


async def test_update_with_events_none_reads_back_all_events(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok({**ENDPOINT, "events": None}))

    endpoint = await twin.call(client, lambda c: c.webhooks.update("wh_1", events=None))

    assert "events" in body_of(twin.last)
    assert body_of(twin.last)["events"] is None
    assert endpoint.events is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.webhooks.create(""), "url"),
        (lambda c: c.webhooks.create("https://e.com/h", events=[]), "at least one event"),
        (lambda c: c.webhooks.create("https://e.com/h", events="payment.succeeded"), "list"),
        (lambda c: c.webhooks.create("https://e.com/h", events=["payment.succeeded", ""]), "non"),
        (lambda c: c.webhooks.create("https://e.com/h", description=5), "description"),
        (lambda c: c.webhooks.update("wh_1"), "at least one field"),
        (lambda c: c.webhooks.update("wh_1", events=svc.NOT_GIVEN), "at least one field"),
        (lambda c: c.webhooks.update("wh_1", events=[]), "at least one event"),
        (lambda c: c.webhooks.update("wh_1", status="deleted"), "status"),
        (lambda c: c.webhooks.update("wh_1", status=None), "status"),
        (lambda c: c.webhooks.update("wh_1", description=None), "description"),
        (lambda c: c.webhooks.update("", status="enabled"), "non-empty"),
        (lambda c: c.webhooks.delete(""), "non-empty"),
        (lambda c: c.webhooks.deliveries(""), "non-empty"),
        (lambda c: c.webhooks.deliveries("wh_1", limit=0), "limit"),
        (lambda c: c.webhooks.deliveries("wh_1", limit=101), "limit"),
        (lambda c: c.webhooks.deliveries("wh_1", limit=True), "limit"),
        (lambda c: c.webhooks.deliveries("wh_1", limit="10"), "limit"),
        (lambda c: c.webhooks.test(""), "non-empty"),
        (lambda c: c.webhooks.retry("wh_1", ""), "non-empty"),
    ],
)
async def test_bad_arguments_fail_before_sending(twin: Twin, call: Any, match: str) -> None:
    await twin.refuses(twin.client(owner_jwt=OWNER_JWT), call, ValueError, match)


# --- typed results ----------------------------------------------------------------------------


async def test_endpoint_results_are_typed(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT, environment="test")
    disabled = {**ENDPOINT, "id": "wh_2", "status": "disabled", "disabled_reason": "failing"}
    twin.reply(
        ok(CREATED, status=201),
        ok({"data": [ENDPOINT, disabled], "has_more": False, "future_field": 1}),
        ok(DELETED),
    )

    created = await twin.call(client, lambda c: c.webhooks.create("https://example.com/h"))
    listed = await twin.call(client, lambda c: c.webhooks.list())
    deleted = await twin.call(client, lambda c: c.webhooks.delete("wh_1"))

    assert isinstance(created, svc.WebhookEndpoint)
    assert created.signing_secret == "whsec_shown_once"
    assert created.events == ["payment.succeeded", "transfer.received"]
    assert created.description == "billing"
    assert created.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert [(e.id, e.status, e.disabled_reason) for e in listed.data] == [
        ("wh_1", "enabled", None),
        ("wh_2", "disabled", "failing"),
    ]
    assert not any(hasattr(e, "signing_secret") for e in listed.data)
    assert deleted.status == "deleted"
    assert type(deleted) is svc.WebhookEndpoint


async def test_event_catalog_is_typed(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(CATALOG))

    catalog = await twin.call(client, lambda c: c.webhooks.events())

    assert catalog.data == [
        svc.EventType(type="payment.succeeded", description="A payment for a resource settled."),
        svc.EventType(type="transfer.received", description="A ledger transfer reached a handle."),
    ]


async def test_delivery_log_is_parsed_with_its_attempts(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(ok(BODIES[svc.DeliveryList]))

    log = await twin.call(client, lambda c: c.webhooks.deliveries("wh_1", limit=2))

    assert log.has_more is True
    done, pending = log.data
    assert isinstance(done, svc.Delivery)
    assert (done.id, done.event_id, done.event_type, done.status) == (
        "dlv_1",
        "evt_1",
        "payment.succeeded",
        "succeeded",
    )
    assert done.attempts == len(done.attempt_log) == 2
    assert done.delivered_at == datetime(2025, 1, 2, 3, 9, 6, tzinfo=UTC)
    assert done.next_attempt_at is None
    first, second = done.attempt_log
    assert first == svc.DeliveryAttempt(
        number=1,
        started_at=datetime(2025, 1, 2, 3, 4, 6, tzinfo=UTC),
        duration_ms=5012,
        status_code=None,
        error="timed out after 5 s",
        response_body=None,
        trigger="schedule",
    )
    assert (second.number, second.status_code, second.trigger) == (2, 204, "retry")
    assert second.started_at == datetime(2025, 1, 2, 3, 9, 6, tzinfo=UTC)
    assert pending.status == "pending"
    assert pending.next_attempt_at == datetime(2025, 1, 2, 3, 35, tzinfo=UTC)
    assert pending.last_status_code == 500
    assert pending.attempt_log[0].error is None  # left out by the server: the default
    assert pending.attempt_log[0].response_body == "oops"


async def test_test_and_retry_return_the_delivery(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    retried_body = {
        **DELIVERY,
        "attempts": 3,
        "attempt_log": [*DELIVERY["attempt_log"], ATTEMPT_OK],
    }
    twin.reply(ok(TEST_DELIVERY), ok(retried_body))

    sample = await twin.call(client, lambda c: c.webhooks.test("wh_1"))
    retried = await twin.call(client, lambda c: c.webhooks.retry("wh_1", "dlv_1"))

    assert sample.event_type == "payment.succeeded"
    assert [a.trigger for a in sample.attempt_log] == ["test"]
    assert retried.id == "dlv_1"  # a delivery keeps its id across retries
    assert retried.attempts == len(retried.attempt_log) == 3


async def test_delivery_without_a_log_reads_as_empty(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    bare = {k: v for k, v in DELIVERY.items() if k not in {"attempt_log", "delivered_at"}}
    twin.reply(ok({"data": [bare]}))

    log = await twin.call(client, lambda c: c.webhooks.deliveries("wh_1"))

    assert log.has_more is False
    assert log.data[0].attempt_log == []
    assert log.data[0].delivered_at is None


async def test_unknown_endpoint_is_not_found(twin: Twin) -> None:
    client = twin.client(owner_jwt=OWNER_JWT)
    twin.reply(fail(404, "not_found", "No such webhook endpoint.", request_id="req_404"))

    error = await twin.raises(client, lambda c: c.webhooks.deliveries("wh_nope"), svc.NotFoundError)

    assert error.request_id == "req_404"
    assert len(twin.requests) == 1


# --- both clients, one API (signatures: tests/test_twins.py) -------------------------------


async def test_both_clients_have_the_namespace() -> None:
    with svc.Client() as client:
        assert isinstance(client.webhooks, _namespaces.Webhooks)
    async with svc.AsyncClient() as aclient:
        assert isinstance(aclient.webhooks, _async_namespaces.AsyncWebhooks)

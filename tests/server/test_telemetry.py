"""Traces and logs (docs/observability.md): with ``SVC_TRACING=true`` one request is one
trace through the pipeline, the database and its outbound calls, every span carrying the
request id; with ``SVC_LOG_FORMAT=json`` a server process logs JSON lines, one per
request, naming the kind of credential and never the credential."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import svc
from reference_server import Settings
from reference_server.domain.events import record_event
from reference_server.reconcile import reconcile_due

from ..conftest import fresh_database
from ..money.helpers import market
from ..processor.helpers import WEBHOOK_SECRET
from ..processor.test_card_refunds import _paid
from ..processor.test_connect import live_seller, onboarded
from ..rails.helpers import funded_payer, open_rail_shop, pay_with
from ..rails.test_chain_refunds import paid_receipt, sent
from ..rails.test_chain_refunds import refund as chain_refund
from ..sandbox.helpers import USDC
from ..support import (
    TEST_SETTINGS,
    LiveServer,
    assert_ledger_sound,
    free_port,
    new_account,
    start_server,
    until,
)
from ..webhooks.receiver import Receiver


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    """The process's tracer provider (set once per process, as OpenTelemetry allows),
    keeping every finished span in memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def traced(make_server: Callable[..., LiveServer], spans: InMemorySpanExporter) -> LiveServer:
    spans.clear()
    return make_server(tracing=True)


def test_one_request_is_one_trace_through_the_database_and_its_outbound_call(
    traced: LiveServer, spans: InMemorySpanExporter, receiver: Receiver
) -> None:
    account = new_account(traced.url)
    auth = {"Authorization": f"Bearer {account.owner_jwt}", "X-Svc-Environment": "test"}
    made = httpx.post(
        traced.url + "/webhooks",
        json={"url": receiver.url},
        headers={**auth, "Idempotency-Key": "hook"},
    )
    assert made.status_code == 201, made.text
    spans.clear()
    r = httpx.post(
        traced.url + f"/webhooks/{made.json()['id']}/test",
        headers={**auth, "Idempotency-Key": "ping"},
    )
    assert r.status_code == 200, r.text
    request_id = r.headers["x-request-id"]
    ours = _request_spans(spans, request_id)
    server = [s for s in ours if s.name == "POST /webhooks/{webhook_id}/test"]
    assert len(server) == 1 and server[0].attributes["http.route"] == "/webhooks/{webhook_id}/test"
    assert {s.context.trace_id for s in ours} == {server[0].context.trace_id}
    statements = [s for s in ours if s.attributes.get("db.system")]
    assert statements, [s.name for s in ours]
    outbound = [s for s in ours if s.name == "outbound POST"]
    assert len(outbound) == 1
    assert outbound[0].attributes["server.address"] == httpx.URL(receiver.url).host
    # Every span of the trace names the request (the database's, made in a worker thread,
    # included), and no span names the webhook's path or a credential.
    trace_spans = [
        s for s in spans.get_finished_spans() if s.context.trace_id == server[0].context.trace_id
    ]
    assert all(s.attributes.get("svc.request_id") == request_id for s in trace_spans)
    text = json.dumps([dict(s.attributes or {}) for s in trace_spans])
    assert account.owner_jwt not in text


def test_a_server_without_tracing_records_no_span(
    server: LiveServer, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    asked = [httpx.get(server.url + "/ready"), httpx.post(server.url + "/owners", json={})]
    ids = {r.headers["x-request-id"] for r in asked}
    assert not [s for s in spans.get_finished_spans() if s.attributes.get("svc.request_id") in ids]


@attrs.define
class Process:
    url: str
    popen: subprocess.Popen[str]

    def stop(self) -> list[str]:
        """Ctrl-C, then what it wrote to stderr, line by line."""
        self.popen.send_signal(signal.SIGINT)
        _, err = self.popen.communicate(timeout=30)
        return err.splitlines()


@pytest.fixture
def json_server(database_url: str, migrated: Callable[[str], None]) -> Iterator[Process]:
    """``svc-server run`` with ``SVC_LOG_FORMAT=json``."""
    migrated(database_url)
    port = free_port()
    env = {**os.environ, "SVC_DATABASE_URL": database_url, "SVC_LOG_FORMAT": "json"}
    proc = Process(
        f"http://127.0.0.1:{port}",
        subprocess.Popen(
            [sys.executable, "-m", "reference_server", "run", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        ),
    )

    def ready() -> bool:
        try:
            return httpx.get(proc.url + "/ready", timeout=1).status_code == 200
        except httpx.TransportError:
            return proc.popen.poll() is not None

    until(ready, "the server did not start", seconds=90)
    assert proc.popen.poll() is None
    yield proc
    if proc.popen.poll() is None:
        proc.popen.kill()
        proc.popen.communicate()


def test_json_logs_are_one_object_per_line_with_the_request(json_server: Process) -> None:
    url = json_server.url
    account = new_account(url)
    r = httpx.get(url + "/sellers/me", headers={"Authorization": f"Bearer {account.seller_key}"})
    assert r.status_code == 200
    missing = httpx.get(
        url + f"/resources/res_{'x' * 20}",
        headers={"Authorization": f"Bearer {account.seller_key}"},
    )
    assert missing.status_code == 404
    garbled = httpx.get(url + "/sellers/me", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert garbled.status_code == 401
    lines = json_server.stop()
    records = [json.loads(line) for line in lines if line.strip()]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    requests = {r["request_id"]: r for r in records if r["logger"] == "reference_server.requests"}
    seen = requests[r.headers["x-request-id"]]
    assert (seen["route"], seen["method"], seen["status"], seen["credential"]) == (
        "/sellers/me",
        "GET",
        200,
        "seller_key",
    )
    assert seen["duration_ms"] > 0
    gone = requests[missing.headers["x-request-id"]]
    assert (gone["route"], gone["status"]) == ("/resources/{resource_id}", 404)
    refused = requests[garbled.headers["x-request-id"]]
    assert (refused["status"], refused["credential"]) == (401, "malformed")
    text = "\n".join(lines)
    assert account.seller_key not in text and account.owner_jwt not in text
    assert "x" * 20 not in text  # the path's values stay out: its template is logged


def test_the_worker_sends_each_webhook_in_a_trace_of_its_own(
    traced: LiveServer, spans: InMemorySpanExporter, receiver: Receiver
) -> None:
    m = market(traced)
    made = httpx.post(
        traced.url + "/webhooks",
        json={"url": receiver.url},
        headers={
            "Authorization": f"Bearer {m.seller_owner_jwt}",
            "X-Svc-Environment": "test",
            "Idempotency-Key": "hook",
        },
    )
    assert made.status_code == 201, made.text
    spans.clear()
    m.agent.pay(resource_id=m.resource.id)
    (delivery,) = receiver.wait_for(1)
    event_id = json.loads(delivery.body)["id"]
    sent = until(
        lambda: [
            s
            for s in spans.get_finished_spans()
            if s.name == "webhook delivery" and s.attributes.get("svc.event_id") == event_id
        ],
        "no delivery span",
    )
    outbound = [
        s
        for s in spans.get_finished_spans()
        if s.name == "outbound POST" and s.context.trace_id == sent[0].context.trace_id
    ]
    assert len(outbound) == 1 and outbound[0].parent.span_id == sent[0].context.span_id
    # Not the request's trace: the worker sent it after the request was answered.  It
    # names that request and links to its trace.
    [request] = [s for s in spans.get_finished_spans() if s.name == "POST /pay"]
    assert request.context.trace_id != sent[0].context.trace_id
    assert sent[0].attributes["svc.origin_request_id"] == request.attributes["svc.request_id"]
    assert [link.context.trace_id for link in sent[0].links] == [request.context.trace_id]
    assert "svc.request_id" not in sent[0].attributes  # no request was being served


def test_a_delivery_of_an_event_no_request_caused_names_no_origin(
    traced: LiveServer, spans: InMemorySpanExporter, receiver: Receiver
) -> None:
    account = new_account(traced.url)
    owner = svc.Client(base_url=traced.url, owner_jwt=account.owner_jwt, environment="test")
    hook = owner.webhooks.create(receiver.url)
    with traced.ctx.db.write() as conn:  # as the worker records a payout's event
        event_id = record_event(
            conn,
            owner_id=account.owner_id,
            environment="test",
            type="withdrawal.paid",
            data={"withdrawal_id": "wd_x"},
            now=traced.ctx.now(),
            endpoints=[hook.id],
        )
    traced.ctx.notify_new_events()
    [sent] = until(
        lambda: [
            s
            for s in spans.get_finished_spans()
            if s.name == "webhook delivery" and s.attributes.get("svc.event_id") == event_id
        ],
        "no delivery span",
    )
    assert "svc.origin_request_id" not in sent.attributes and not sent.links


def _ours(spans: InMemorySpanExporter, request_id: str) -> list[ReadableSpan]:
    return [
        s for s in spans.get_finished_spans() if s.attributes.get("svc.request_id") == request_id
    ]


def _traceparent(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` naming ``span``."""
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _request_spans(spans: InMemorySpanExporter, request_id: str) -> list[ReadableSpan]:
    """The finished spans naming the request, once its server span has ended: that span
    ends after the answer's last byte is sent, so after the client has read it."""
    until(
        lambda: [s for s in _ours(spans, request_id) if s.kind == trace.SpanKind.SERVER],
        "no server span named the request",
    )
    return _ours(spans, request_id)


@pytest.fixture
def live_gate(tmp_path: Path, spans: InMemorySpanExporter) -> Iterator[Callable[[str], LiveServer]]:
    """A traced server settling ``live`` open rails through the facilitator at the URL
    given (a test server's sandbox one, on loopback, as tests/rails/test_live.py)."""
    started: list[LiveServer] = []

    def start(facilitator_url: str) -> LiveServer:
        (tmp_path / "live").mkdir()
        url = stack.enter_context(fresh_database(tmp_path / "live"))
        settings = Settings(
            **{
                **TEST_SETTINGS,
                "database_url": url,
                "tracing": True,
                "live_facilitator_url": facilitator_url,
                "live_chain_id": 84532,
                "live_asset_address": USDC,
                "live_asset_name": "USDC",
                "live_asset_version": "2",
                "live_deposit_address": "0x000000000000000000000000000000000000dEaD",
            }
        )
        started.append(start_server(settings))
        spans.clear()
        return started[-1]

    with contextlib.ExitStack() as stack:
        yield start
        for live in started:
            live.stop()
            assert_ledger_sound(live)


@pytest.mark.anyio
async def test_the_facilitators_verify_and_settle_are_spans_of_the_gate_request(
    server: LiveServer, live_gate: Callable[[str], LiveServer], spans: InMemorySpanExporter
) -> None:
    shop = open_rail_shop(live_gate(server.url + "/sandbox/x402"), environment="live")
    paid = await pay_with("x402", shop.resource.gate_url, funded_payer(server))
    assert paid.status_code == 200, paid.text
    request_id = paid.headers["x-request-id"]
    ours = _request_spans(spans, request_id)
    calls = {s.name: s for s in ours if s.name.startswith("facilitator ")}
    assert set(calls) == {"facilitator verify", "facilitator settle"}, [s.name for s in ours]
    [gate] = [s for s in ours if s.kind == trace.SpanKind.SERVER]
    host = httpx.URL(server.url).host
    for name, outcome in (("facilitator verify", "valid"), ("facilitator settle", "settled")):
        call = calls[name]
        assert call.context.trace_id == gate.context.trace_id
        assert call.attributes["server.address"] == host
        assert call.attributes["http.response.status_code"] == 200
        assert call.attributes["svc.outcome"] == outcome
        assert call.status.status_code != trace.StatusCode.ERROR
    # The payer's signed authorization is in no attribute.
    text = json.dumps([dict(s.attributes or {}) for s in ours])
    assert "signature" not in text and "0x" + "0" * 8 not in text


@pytest.mark.anyio
async def test_a_facilitator_that_fails_is_an_error_span(
    server: LiveServer,
    live_gate: Callable[[str], LiveServer],
    spans: InMemorySpanExporter,
    serve_app: Any,
) -> None:
    heard: list[str | None] = []

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        heard.append(headers[b"traceparent"].decode() if b"traceparent" in headers else None)
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"down"})

    down = serve_app(broken)
    shop = open_rail_shop(live_gate(down.url + "/x402"), environment="live")
    paid = await pay_with("x402", shop.resource.gate_url, funded_payer(server))
    assert paid.status_code >= 400
    request_id = paid.headers["x-request-id"]
    [call] = until(
        lambda: [s for s in _ours(spans, request_id) if s.name.startswith("facilitator ")],
        "no facilitator span",
    )
    assert call.name == "facilitator verify"
    assert call.attributes["http.response.status_code"] == 503
    assert call.status.status_code == trace.StatusCode.ERROR
    # The facilitator was told the trace, as its call's span: one that traces continues it.
    assert heard == [_traceparent(call)]


SECRET_KEY = "sk_test_tele_" + "k" * 16


@pytest.fixture
def stripe_live(
    stripe_double: Any, tmp_path: Path, spans: InMemorySpanExporter
) -> Iterator[LiveServer]:
    """A traced server whose live payouts go through the local Stripe."""
    stripe_double.reset()
    with fresh_database(tmp_path) as url:
        settings = {
            **TEST_SETTINGS,
            "database_url": url,
            "tracing": True,
            "processor": "stripe",
            "stripe_secret_key": SECRET_KEY,
            "stripe_webhook_secret": WEBHOOK_SECRET,
            "stripe_api_base": stripe_double.api_base,
            "stripe_max_network_retries": 0,
            "worker_poll_seconds": 0.05,
            "auto_payout_minimum_micros": 0,
        }
        live = start_server(Settings(**settings))
        stripe_double.set_webhook(live.url + "/processor/webhooks", WEBHOOK_SECRET)
        spans.clear()
        yield live
        live.stop()
        assert_ledger_sound(live)


def _onboard(live: LiveServer) -> tuple[httpx.Response, str]:
    acct = new_account(live.url, "live")
    r = httpx.post(
        live.url + "/sellers/me/connect/onboard",
        json={"country": "US"},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
        timeout=60,
    )
    return r, acct.seller_key


def test_each_processor_call_is_a_span_of_the_request(
    stripe_live: LiveServer, stripe_double: Any, spans: InMemorySpanExporter
) -> None:
    r, seller_key = _onboard(stripe_live)
    assert r.status_code == 200, r.text
    request_id = r.headers["x-request-id"]
    ours = _request_spans(spans, request_id)
    calls = [s for s in ours if s.name.startswith("processor ")]
    assert [s.name for s in calls] == [
        "processor accounts.create",
        "processor account_links.create",
    ]
    [server_span] = [s for s in ours if s.kind == trace.SpanKind.SERVER]
    host = httpx.URL(stripe_double.api_base).host
    for call in calls:
        assert call.context.trace_id == server_span.context.trace_id
        assert call.attributes["server.address"] == host
        assert call.attributes["http.response.status_code"] == 200
        assert call.attributes["svc.processor"] == "stripe"
    # Each call told the processor its span, as a W3C traceparent.
    sent = [q["traceparent"] for q in stripe_double.requests() if q["method"] == "POST"]
    assert sent == [_traceparent(call) for call in calls]
    account_id = r.json()["account"]["account_id"]
    text = json.dumps([dict(s.attributes or {}) for s in ours])
    assert SECRET_KEY not in text and seller_key not in text and account_id not in text


def test_a_processor_call_that_fails_is_an_error_span(
    stripe_live: LiveServer, stripe_double: Any, spans: InMemorySpanExporter
) -> None:
    stripe_double.fault("/v1/accounts", 500)
    r, _ = _onboard(stripe_live)
    assert r.status_code == 503, r.text
    [call] = until(
        lambda: [
            s for s in _ours(spans, r.headers["x-request-id"]) if s.name.startswith("processor ")
        ],
        "no processor span",
    )
    assert call.name == "processor accounts.create"
    assert call.attributes["http.response.status_code"] == 500
    assert call.status.status_code == trace.StatusCode.ERROR


def test_a_withdrawal_step_in_the_worker_names_the_request_that_asked_for_it(
    stripe_live: LiveServer, stripe_double: Any, spans: InMemorySpanExporter
) -> None:
    seller = live_seller(stripe_live, sales=1)
    onboarded(seller, stripe_double)
    until(lambda: seller.call("GET", "/sellers/me/connect").json()["payouts_enabled"])
    r = seller.withdraw()
    assert r.status_code == 201, r.text
    request_id = r.headers["x-request-id"]

    def steps() -> list[ReadableSpan]:
        return [
            s
            for s in spans.get_finished_spans()
            if s.name == "withdrawal step"
            and s.attributes.get("svc.origin_request_id") == request_id
        ]

    until(
        lambda: any(
            c.parent is not None and c.parent.span_id == step.context.span_id
            for step in steps()
            for c in spans.get_finished_spans()
            if c.name == "processor transfers.create"
        ),
        "no transfer made inside a withdrawal step",
    )
    [first, *_] = steps()
    assert first.attributes["svc.withdrawal_id"] == r.json()["id"]
    assert first.parent is None  # the worker's own trace, not the request's


def test_a_card_refund_asked_by_the_worker_names_the_request_that_asked_for_it(
    stripe_live: LiveServer, stripe_double: Any, spans: InMemorySpanExporter
) -> None:
    it, receipt_id, _ = _paid(stripe_live, stripe_double)
    r = httpx.post(
        stripe_live.url + "/refunds",
        json={"receipt_id": receipt_id, "amount": "1.00"},
        headers={**it.seller, "Idempotency-Key": "tele-refund"},
    )
    assert r.status_code == 201, r.text
    request_id = r.headers["x-request-id"]
    [step] = until(
        lambda: [
            s
            for s in spans.get_finished_spans()
            if s.name == "card refund" and s.attributes.get("svc.origin_request_id") == request_id
        ],
        "no card refund span",
    )
    assert step.attributes["svc.refund_id"] == r.json()["id"]
    assert step.parent is None  # the worker's own trace, not the request's
    inside = [
        c.name
        for c in spans.get_finished_spans()
        if c.parent is not None and c.parent.span_id == step.context.span_id
    ]
    assert inside.count("processor refunds.create") == 1


@pytest.mark.anyio
async def test_a_chain_refund_and_a_reconciliation_are_worker_traces(
    make_server: Callable[..., LiveServer], spans: InMemorySpanExporter
) -> None:
    # an hourly reconciliation, not run yet (its first round waits a minute)
    traced = make_server(tracing=True, reconcile_interval_seconds=3600)
    shop = open_rail_shop(traced)
    receipt_id, _ = await paid_receipt(traced, shop, "x402")
    r = chain_refund(shop, receipt_id, "0.10")
    assert r.status_code == 201, r.text
    assert sent(shop, r.json()["id"]).status == "succeeded"
    [step] = until(
        lambda: [
            s
            for s in spans.get_finished_spans()
            if s.name == "chain refund"
            and s.attributes.get("svc.origin_request_id") == r.headers["x-request-id"]
        ],
        "no chain refund span",
    )
    assert step.attributes["svc.refund_id"] == r.json()["id"] and step.parent is None
    statements = [
        s
        for s in spans.get_finished_spans()
        if s.context.trace_id == step.context.trace_id and s.attributes.get("db.system")
    ]
    assert statements  # the refund's writes are inside its trace

    reconcile_due(traced.ctx)
    [run] = [s for s in spans.get_finished_spans() if s.name == "reconciliation"]
    assert run.attributes["svc.environment"] == "test" and run.parent is None
    assert run.attributes["svc.reconciliation.drift"] == 0

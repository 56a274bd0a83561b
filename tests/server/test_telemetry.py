"""Traces and logs (docs/observability.md): with ``SVC_TRACING=true`` one request is one
trace through the pipeline, the database and its outbound calls, every span carrying the
request id; with ``SVC_LOG_FORMAT=json`` a server process logs JSON lines, one per
request, naming the kind of credential and never the credential."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import attrs
import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ..money.helpers import market
from ..support import LiveServer, free_port, new_account, until
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
    ours = until(
        lambda: [
            s
            for s in spans.get_finished_spans()
            if s.attributes.get("svc.request_id") == request_id
        ],
        "no span named the request",
    )
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
    # Not the request's trace: the worker sent it after the request was answered.
    request = [s for s in spans.get_finished_spans() if s.name == "POST /pay"]
    assert request and request[0].context.trace_id != sent[0].context.trace_id

"""``GET /metrics``: off the API's surface (only with ``SVC_METRICS_TOKEN``, only to that
token, in no OpenAPI document), counting requests under their route's template and
reading the books from the database.  Several processes in one deployment:
tests/scale/test_multi_process.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reference_server import reconcile
from reference_server.domain.paid_fetch.hot_wallet import hot_wallet
from reference_server.sandbox import chain

from ..money.helpers import market
from ..support import LiveServer

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
TOKEN = "metrics-" + "k" * 24
Scrape = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(live: LiveServer) -> Scrape:
    r = httpx.get(live.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def total(scraped: Scrape, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, got), v in scraped.items() if n == name and want <= got)


@pytest.fixture
def live(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(metrics_token=TOKEN)


def test_without_a_token_there_is_no_such_route(server: LiveServer) -> None:
    for path in ("/metrics", "/api/metrics"):
        r = httpx.get(server.url + path, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "unauthenticated"),
        ({"Authorization": "Bearer wrong"}, "invalid_credential"),
        ({"Authorization": TOKEN}, "invalid_credential"),
    ],
)
def test_only_the_token_reads_it(live: LiveServer, headers: dict[str, str], code: str) -> None:
    r = httpx.get(live.url + "/metrics", headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == code
    assert r.json()["request_id"] == r.headers["x-request-id"]
    assert "svc_" not in r.text


def test_it_is_in_no_api_document(live: LiveServer) -> None:
    assert httpx.get(live.url + "/api/metrics").status_code == 404
    paths = httpx.get(live.url + "/agent-openapi.json").json()["paths"]
    assert paths and not any("metrics" in path for path in paths)
    assert "/metrics" not in httpx.get(live.url + "/llms.txt").text


def test_requests_are_counted_under_their_route_template(live: LiveServer) -> None:
    m = market(live)
    before = scrape(live)
    for _ in range(3):
        m.seller.resources.get(m.resource.id)
    assert httpx.get(live.url + "/no/such/path").status_code == 404
    after = scrape(live)

    def delta(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    route = "/resources/{resource_id}"
    assert delta("svc_http_requests_total", route=route, method="GET", status="200") == 3
    assert delta("svc_http_request_duration_seconds_count", route=route, method="GET") == 3
    assert delta("svc_http_requests_total", route="unmatched", status="404") == 1
    # No id of any object, nor any path as asked, becomes a label value.
    labels = {value for (_, pairs) in after for _, value in pairs}
    assert m.resource.id not in " ".join(labels)
    assert "/no/such/path" not in labels


def test_the_books_are_read_as_they_are(live: LiveServer) -> None:
    m = market(live, price="1.25")
    # Nothing answers at port 9: each sale's event waits in the outbox for its next try.
    hook = httpx.post(
        live.url + "/webhooks",
        json={"url": "http://127.0.0.1:9/hook", "events": ["payment.succeeded"]},
        headers={
            "Authorization": f"Bearer {m.seller_owner_jwt}",
            "X-Svc-Environment": "test",
            "Idempotency-Key": "hook",
        },
    )
    assert hook.status_code == 201, hook.text
    receipts = [m.agent.pay(resource_id=m.resource.id).receipt_id for _ in range(2)]
    r = httpx.post(
        live.url + "/refunds",
        json={"receipt_id": receipts[0], "amount": "0.25"},
        headers={"Authorization": f"Bearer {m.seller_key}", "Idempotency-Key": "refund-1"},
    )
    assert r.status_code == 201, r.text
    scraped = scrape(live)
    paid = {"environment": "test", "kind": "resource", "rail": "rill", "status": "settled"}
    assert total(scraped, "svc_payments_total", **paid) == 2
    assert total(scraped, "svc_payments_amount_usd_total", **paid) == 2.5
    assert total(scraped, "svc_payments_refunded_usd_total", **paid) == 0.25
    assert total(scraped, "svc_webhook_outbox_backlog") == 2
    assert ("svc_webhook_outbox_oldest_due_age_seconds", frozenset()) in scraped


def test_reconciliation_drift_is_the_latest_runs(live: LiveServer) -> None:
    ctx = live.ctx
    with ctx.db.write() as conn:  # the operator refills the hot wallet's float
        chain.mint(conn, to=hot_wallet(ctx, "test").address, value=1_234_567, now=ctx.now())
    with ctx.db.write() as conn:
        reconcile.record(conn, reconcile.reconcile(ctx, "test"), environment="test", now=ctx.now())
    scraped = scrape(live)
    assert total(scraped, "svc_reconciliation_drift", environment="test") == 0
    assert total(scraped, "svc_reconciliation_failed", environment="test") == 0
    assert total(scraped, "svc_reconciliation_last_run_timestamp_seconds", environment="test") > 0
    # a refill is no drift; the float is what the run read off the chain
    assert total(scraped, "svc_hot_wallet_float_usd", environment="test") == 1.234567


def test_rate_limit_refusals_are_counted(make_server: Callable[..., LiveServer]) -> None:
    live = make_server(metrics_token=TOKEN, rate_limit="2/minute")
    before = total(scrape(live), "svc_rate_limited_total", limit="rate_limit")
    answers = [httpx.get(live.url + "/sellers").status_code for _ in range(4)]
    assert answers.count(429) == 2
    after = total(scrape(live), "svc_rate_limited_total", limit="rate_limit")
    assert after - before == 2


def test_the_dashboard_charts_only_families_the_server_exports(live: LiveServer) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    charted = {name for expr in exprs for name in re.findall(r"\bsvc_[a-z_]+", expr)}
    r = httpx.get(live.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    families = text_string_to_metric_families(r.text)
    exported = {s.name for family in families for s in family.samples}
    exported |= {family.name for family in text_string_to_metric_families(r.text)}
    missing = charted - exported
    # A family with no sample yet (no withdrawal made) still has its HELP line.
    missing -= set(re.findall(r"^# HELP (\S+)", r.text, flags=re.MULTILINE))
    missing -= {name + "_total" for name in re.findall(r"^# HELP (\S+)", r.text, flags=re.M)}
    missing -= {name + "_bucket" for name in re.findall(r"^# HELP (\S+)", r.text, flags=re.M)}
    assert charted and missing == set()


def test_approvals_pending_are_counted(live: LiveServer) -> None:
    m = market(live, price="1.00", approval_above="0.50")
    r = httpx.post(
        live.url + "/pay",
        json={"resource_id": m.resource.id},
        headers={"Authorization": f"Bearer {m.wallet_key}", "Idempotency-Key": "over-the-line"},
    )
    assert r.status_code == 202, r.text
    assert total(scrape(live), "svc_approvals_pending", environment="test") == 1

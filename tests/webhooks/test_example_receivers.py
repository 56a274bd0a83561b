"""The receivers of docs/webhooks.md (the files of docs/examples/) run against signed
deliveries: ones captured from the reference server's outbox, and ones signed here exactly
as the server signs them (its own envelope, ``svc.webhooks.headers``)."""

from __future__ import annotations

import importlib
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from starlette.testclient import TestClient

import svc
from reference_server.outbox.delivery import event_body
from svc import webhooks

from ..money.helpers import market
from .conftest import fast
from .receiver import Received, Receiver

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
DOC = ROOT / "docs" / "webhooks.md"
FRAMEWORKS = ("starlette", "fastapi", "flask")
PATH = "/svc/webhooks"
SECRET = "whsec_" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def examples() -> Iterator[dict[str, ModuleType]]:
    """The example modules, imported as their docstrings run them: from docs/examples."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(EXAMPLES))
        yield {
            name: importlib.import_module(name)
            for name in ("credit_store", *(f"receiver_{f}" for f in FRAMEWORKS))
        }
    for name in ("credit_store", *(f"receiver_{f}" for f in FRAMEWORKS)):
        sys.modules.pop(name, None)


@attrs.frozen
class Answer:
    status: int
    body: bytes


@attrs.frozen
class App:
    """One example receiver with a fresh store, and a way to post a delivery to it."""

    store: Any  # credit_store.CreditStore
    post: Callable[[bytes, Mapping[str, str]], Answer]


def make_app(examples: dict[str, ModuleType], framework: str, secret: str = SECRET) -> App:
    store = examples["credit_store"].CreditStore()
    app = examples[f"receiver_{framework}"].create_app([secret], store)
    if framework == "flask":
        client = app.test_client()

        def post_flask(body: bytes, headers: Mapping[str, str]) -> Answer:
            # buffered: the response is read and closed, as a WSGI server does, which runs
            # its call_on_close work
            r = client.post(PATH, data=body, headers=dict(headers), buffered=True)
            return Answer(r.status_code, r.get_data())

        return App(store, post_flask)

    test_client = TestClient(app)  # runs background tasks before it returns

    def post_asgi(body: bytes, headers: Mapping[str, str]) -> Answer:
        r = test_client.post(PATH, content=body, headers=dict(headers))
        return Answer(r.status_code, r.content)

    return App(store, post_asgi)


@pytest.fixture(params=FRAMEWORKS)
def app(request: pytest.FixtureRequest, examples: dict[str, ModuleType]) -> App:
    return make_app(examples, request.param)


# --- deliveries signed here, exactly as the server signs them ----------------------------


def payment_body(
    *, receipt_id: str = "rcpt_01", credits: Any = 100, sku_kind: str = "credit_topup"
) -> tuple[str, bytes]:
    """A ``payment.succeeded`` event id and body, in the server's own envelope."""
    event_id = "evt_" + secrets.token_hex(13)
    data = {
        "receipt_id": receipt_id,
        "ok": True,
        "type": "resource",
        "rail": "rill",
        "request_id": "req_" + secrets.token_hex(8),
        "resource_id": "res_01",
        "metadata": {"sku_kind": sku_kind, "credits": credits, "credit_unit": "report"},
        "amount": "2.00",
        "platform_fee": "0.02",
        "environment": "test",
        "settlement": "ledger",
    }
    return event_id, event_body(event_id, "payment.succeeded", datetime.now(UTC), data)


def signed(
    event_id: str, body: bytes, *, secret: str = SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """The delivery headers the worker sends (``Job.signed_headers``)."""
    headers = webhooks.headers(
        secret,
        webhook_id=event_id,
        timestamp=int(time.time()) if timestamp is None else timestamp,
        body=body,
    )
    headers["Content-Type"] = "application/json"
    return headers


def test_a_delivery_credits_once_and_its_retry_changes_nothing(app: App) -> None:
    event_id, body = payment_body(receipt_id="rcpt_a", credits=100)
    first = app.post(body, signed(event_id, body))
    assert first.status == 204
    assert app.store.credited_receipts == {"rcpt_a": Decimal(100)}
    assert app.store.credits == 100
    assert app.store.processed_events == {event_id}
    # the outbox's retry: the same id and body, a fresh timestamp and signature
    retry = app.post(body, signed(event_id, body, timestamp=int(time.time()) + 1))
    assert retry.status == 204
    assert app.store.credits == 100 and app.store.credited_receipts == {"rcpt_a": 100}


def test_the_same_receipt_in_another_event_credits_once(app: App) -> None:
    """Spec rule 7: the receipt id, not only the event id, is the top-up's dedupe key."""
    for _ in range(2):
        event_id, body = payment_body(receipt_id="rcpt_same", credits="2.5")
        assert app.post(body, signed(event_id, body)).status == 204
    assert len(app.store.processed_events) == 2
    assert app.store.credits == Decimal("2.5")


def test_events_that_credit_nothing_are_acknowledged(app: App) -> None:
    one_shot_id, one_shot = payment_body(sku_kind="one_shot", credits=None)
    funding_id = "evt_" + secrets.token_hex(13)
    funding = event_body(
        funding_id,
        "funding.paid",
        datetime.now(UTC),
        {"wallet_key_id": "vw_01", "amount": "1.00", "balance": "1.00", "environment": "test"},
    )
    newer_id = "evt_" + secrets.token_hex(13)
    newer = event_body(newer_id, "thing.invented_later", datetime.now(UTC), {"x": 1})
    for event_id, body in ((one_shot_id, one_shot), (funding_id, funding), (newer_id, newer)):
        assert app.post(body, signed(event_id, body)).status == 204
    assert app.store.credits == 0 and app.store.credited_receipts == {}
    assert app.store.processed_events == {one_shot_id, funding_id, newer_id}


def test_forged_deliveries_are_400(app: App) -> None:
    event_id, body = payment_body()
    headers = signed(event_id, body)
    wrong_key = signed(event_id, body, secret="whsec_" + secrets.token_urlsafe(24))
    flipped = {**headers, "X-Svc-Signature": headers["X-Svc-Signature"][:-1] + "0"}
    if flipped == headers:
        flipped["X-Svc-Signature"] = headers["X-Svc-Signature"][:-1] + "1"
    more_credits = body.replace(b'"credits":100', b'"credits":100000')
    assert more_credits != body
    for forged_body, forged_headers in (
        (body, wrong_key),
        (body, flipped),
        (more_credits, headers),  # a changed body under the original signature
    ):
        answer = app.post(forged_body, forged_headers)
        assert answer.status == 400
        assert b"no signature in X-Svc-Signature matches" in answer.body
    missing = {k: v for k, v in headers.items() if k != "X-Svc-Signature"}
    assert app.post(body, missing).status == 400
    assert app.store.credits == 0 and app.store.processed_events == set()


def test_stale_and_future_timestamps_are_400(app: App) -> None:
    event_id, body = payment_body()
    for timestamp in (int(time.time()) - 301 - 5, int(time.time()) + 301 + 5):
        answer = app.post(body, signed(event_id, body, timestamp=timestamp))
        assert answer.status == 400
        assert b"X-Svc-Timestamp is too" in answer.body
    assert app.store.credits == 0 and app.store.processed_events == set()
    assert app.post(body, signed(event_id, body)).status == 204  # the same, fresh, is fine


# --- deliveries captured from the reference server's outbox ------------------------------


def replayed(received: Received) -> dict[str, str]:
    """The delivery's own headers, as the loopback receiver got them."""
    return {
        name: value
        for name, value in received.headers.items()
        if name.lower().startswith("x-svc-") or name.lower() == "content-type"
    }


def test_real_deliveries_from_the_outbox(
    make_server: Any, receiver: Receiver, examples: dict[str, ModuleType]
) -> None:
    live = make_server(**fast())
    receiver.statuses = [500]  # the first attempt fails: the outbox sends it again
    m = market(
        live,
        price="2.00",
        metadata={"sku_kind": "credit_topup", "credits": 100, "credit_unit": "report"},
    )
    seller_owner = svc.Client(base_url=live.url, owner_jwt=m.seller_owner_jwt, environment="test")
    endpoint = seller_owner.webhooks.create(receiver.url, events=["payment.succeeded"])
    paid = m.agent.pay(resource_id=m.resource.id)
    first, retry = receiver.wait_for(2)
    assert first.body == retry.body
    assert first.headers["X-Svc-Webhook-Id"] == retry.headers["X-Svc-Webhook-Id"]
    secret = endpoint.signing_secret
    stale = signed(
        first.headers["X-Svc-Webhook-Id"],
        first.body,
        secret=secret,
        timestamp=int(first.headers["X-Svc-Timestamp"]) - 600,
    )
    tampered = first.body.replace(b'"credits":100', b'"credits":900')
    assert tampered != first.body

    for framework in FRAMEWORKS:
        app = make_app(examples, framework, secret)
        assert app.post(first.body, replayed(first)).status == 204, framework
        assert app.store.credited_receipts == {paid.receipt_id: Decimal(100)}, framework
        assert app.post(retry.body, replayed(retry)).status == 204, framework
        assert app.post(first.body, replayed(first)).status == 204, framework  # a replay
        assert app.store.credits == 100, framework
        assert app.post(tampered, replayed(first)).status == 400, framework
        assert app.post(first.body, stale).status == 400, framework
        assert app.store.credits == 100, framework


# --- the page shows the files ------------------------------------------------------------


def test_docs_show_exactly_the_example_files() -> None:
    text = DOC.read_text()
    blocks = re.findall(
        r"^<!-- example: (docs/examples/[\w.]+) -->\n```python\n(.*?)^```$", text, re.S | re.M
    )
    shown = dict(blocks)
    assert len(shown) == len(blocks), "a file is shown twice"
    # this page's files; docs/examples/ also holds other pages' examples
    files = {"docs/examples/credit_store.py"} | {
        f"docs/examples/{p.name}" for p in EXAMPLES.glob("receiver_*.py")
    }
    assert set(shown) == files
    for path, code in shown.items():
        assert code == (ROOT / path).read_text(), f"docs/webhooks.md differs from {path}"

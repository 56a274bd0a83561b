"""``POST /processor/webhooks``: verified by the SDK's signature check, recorded once per
event id, unknown types acknowledged and ignored, refused when the server has no secret."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import select

from reference_server import Settings
from reference_server.store import tables as t

from ..conftest import fresh_database
from ..support import TEST_SETTINGS, LiveServer, start_server
from .helpers import WEBHOOK_SECRET, deliver, event, sign

STRIPE = {
    "processor": "stripe",
    "stripe_secret_key": "sk_test_local",
    "stripe_webhook_secret": WEBHOOK_SECRET,
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with fresh_database(tmp_path) as url:
        live = start_server(Settings(**{**TEST_SETTINGS, **STRIPE, "database_url": url}))
        yield live
        live.stop()


def _recorded(live: LiveServer) -> list[tuple[str, str, bool]]:
    pe = t.processor_events
    with live.ctx.db.read() as conn:
        rows = conn.execute(select(pe.c.id, pe.c.type, pe.c.applied).order_by(pe.c.id)).all()
    return [(r.id, r.type, r.applied) for r in rows]


def test_an_unknown_type_is_acknowledged_recorded_and_ignored(server: LiveServer) -> None:
    body = event("customer.created", {"id": "cus_1", "object": "customer"})
    answer = deliver(server.url, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["id"] == body["id"]
    assert answer.json()["received"] == "ignored"
    assert _recorded(server) == [(body["id"], "customer.created", False)]


def test_a_redelivered_event_changes_nothing(server: LiveServer) -> None:
    body = event("customer.created", {"id": "cus_1", "object": "customer"})
    assert deliver(server.url, body).json()["received"] == "ignored"
    with ThreadPoolExecutor(4) as pool:
        again = list(pool.map(lambda _: deliver(server.url, body), range(4)))
    assert [a.status_code for a in again] == [200] * 4
    assert {a.json()["received"] for a in again} == {"duplicate"}
    assert len(_recorded(server)) == 1


@pytest.mark.parametrize(
    "signed",
    [
        lambda payload: "",
        lambda payload: "t=1,v1=00",
        lambda payload: sign(b"another payload"),
        lambda payload: sign(payload, secret="whsec_someone_else"),
    ],
    ids=["missing", "garbage", "other-payload", "other-secret"],
)
def test_an_unverified_event_is_refused_and_not_recorded(
    server: LiveServer, signed: Callable[[bytes], str]
) -> None:
    body = event("account.updated", {"id": "acct_1", "object": "account"})
    answer = deliver(server.url, body, signature=signed(json.dumps(body).encode()))
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_signature"
    assert _recorded(server) == []


def test_a_correctly_signed_but_stale_event_is_refused(server: LiveServer) -> None:
    body = event("customer.created", {"id": "cus_1"})
    payload = json.dumps(body).encode()
    stale = sign(payload, at=int(time.time()) - 3600)
    answer = deliver(server.url, body, signature=stale)
    assert answer.json()["error"]["code"] == "invalid_signature"


def test_a_server_without_a_webhook_secret_takes_no_events(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        live = start_server(Settings(**{**TEST_SETTINGS, "database_url": url}))
        try:
            answer = deliver(live.url, event("customer.created", {"id": "cus_1"}))
        finally:
            live.stop()
    assert answer.status_code == 404

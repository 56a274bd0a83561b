"""Cards in live through Stripe Checkout, against the local Stripe (``tests.stripe_double``
in front of localstripe): the buy page sends the payer to a Checkout Session and the sale is
booked only when ``checkout.session.completed`` arrives, once, with localstripe's real
PaymentIntent id; a declined or abandoned checkout books nothing; a card top-up is pending
until paid, then credited once with ``funding.paid``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import select

from reference_server import Settings
from reference_server.store import tables as t

from ..buypage.helpers import BROWSER, Item, item, receipt_of, token_of
from ..conftest import fresh_database
from ..support import TEST_SETTINGS, LiveServer, assert_ledger_sound, start_server, until
from ..topups.helpers import account_wallet, owner_client, owner_headers
from .helpers import WEBHOOK_SECRET, deliver, event

PAYING = "4242424242424242"
DECLINED = "4000000000000002"


@pytest.fixture
def server(tmp_path: Path, stripe_double: Any) -> Iterator[LiveServer]:
    stripe_double.reset()
    with fresh_database(tmp_path) as url:
        settings = {
            **TEST_SETTINGS,
            "database_url": url,
            "processor": "stripe",
            "stripe_secret_key": "sk_test_cards",
            "stripe_webhook_secret": WEBHOOK_SECRET,
            "stripe_api_base": stripe_double.api_base,
            "stripe_max_network_retries": 2,
        }
        live = start_server(Settings(**settings))
        stripe_double.set_webhook(live.url + "/processor/webhooks", WEBHOOK_SECRET)
        try:
            yield live
            assert_ledger_sound(live)
        finally:
            live.stop()


def _checkout(live: LiveServer, session_id: str) -> Any:
    cc = t.card_checkouts
    with live.ctx.db.read() as conn:
        return conn.execute(select(cc).where(cc.c.session_id == session_id)).one()


def _events(live: LiveServer, type: str) -> list[dict[str, Any]]:
    ev = t.events
    with live.ctx.db.read() as conn:
        rows = conn.execute(select(ev.c.data).where(ev.c.type == type)).all()
    return [dict(r.data) for r in rows]


def _session_of(url: str) -> str:
    found = re.search(r"/(cs_[A-Za-z0-9_]+)", urlsplit(url).path)
    assert found is not None, url
    return found.group(1)


def _start(it: Item, token: str | None = None) -> httpx.Response:
    """Press "Pay with card" on the live buy page."""
    if token is None:
        token = token_of(httpx.get(it.pay_url).text)
    return httpx.post(it.pay_url, data={"token": token}, headers=BROWSER)


def _session_posts(stripe_double: Any) -> list[dict[str, Any]]:
    """The requests the double got to create a Checkout Session."""
    return [
        r
        for r in stripe_double.requests()
        if r["method"] == "POST" and r["path"] == "/v1/checkout/sessions"
    ]


def _settled(stripe_double: Any, type: str, count: int = 1) -> list[dict[str, Any]]:
    """The double's deliveries of ``type`` that reached the server, once ``count`` did."""

    def delivered() -> list[dict[str, Any]] | None:
        found = [
            d
            for d in stripe_double.deliveries()
            if d["type"] == type and d["status"] == "delivered"
        ]
        return found if len(found) >= count else None

    return list(until(delivered))


def test_the_live_page_sends_the_payer_to_checkout_and_books_on_completion(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live", amount="4.00")
    page = httpx.get(it.pay_url)
    assert page.status_code == 200
    assert '<button type="submit">Pay with card</button>' in page.text
    assert 'name="number"' not in page.text  # the card is typed at the processor
    origin = stripe_double.api_base.rstrip("/")
    assert f"form-action 'self' {origin}" in page.headers["content-security-policy"]
    token = token_of(page.text)

    first = _start(it, token)
    assert first.status_code == 303, first.text
    checkout_url = first.headers["location"]
    assert checkout_url.startswith(origin + "/_double/checkout/cs_")
    again = _start(it, token)  # a double submit: the same session
    assert again.status_code == 303 and again.headers["location"] == checkout_url
    created = _session_posts(stripe_double)
    assert len(created) == 1, created
    cs = _session_of(checkout_url)
    row = _checkout(server, cs)
    assert (row.kind, row.status, row.amount_micros) == ("sale", "open", 4_000_000)
    assert created[0]["idempotency_key"] == f"svc-checkout-{row.id}"
    session = stripe_double.client("sk_test_cards").v1.checkout.sessions.retrieve(cs)
    assert (session.mode, session.amount_total, session.currency) == ("payment", 400, "usd")
    assert session.client_reference_id == row.id
    assert session.metadata is not None
    assert session.metadata.to_dict() == {
        "svc_checkout_id": row.id,
        "kind": "sale",
        "environment": "live",
        "resource_id": it.resource["id"],
    }
    assert session.success_url == f"{it.pay_url}/done?session={{CHECKOUT_SESSION_ID}}"
    assert session.cancel_url == it.pay_url

    done_url = f"{it.pay_url}/done?session={cs}"
    waiting = httpx.get(done_url)
    assert waiting.status_code == 200 and "confirming" in waiting.text
    assert waiting.headers["cache-control"] == "no-store"
    assert it.payments() == 0  # nothing booked before the processor says so

    paid = stripe_double.pay_checkout(cs, PAYING)
    assert paid["paid"] is True
    intent = paid["object"]["payment_intent"]
    assert intent.startswith("pi_")
    until(lambda: _checkout(server, cs).receipt_id)
    receipt = httpx.get(done_url)
    assert receipt.status_code == 200
    receipt_id = receipt_of(receipt.text)
    assert receipt_id == _checkout(server, cs).receipt_id
    assert "4.00 USD" in receipt.text
    verified = it.verify(receipt_id)
    assert verified["valid"] is True and verified["rail"] == "card"
    assert it.payments() == 1
    assert it.balance() == Decimal("3.96")  # the price less the 1% platform fee
    succeeded = [e for e in _events(server, "payment.succeeded") if e["receipt_id"] == receipt_id]
    assert [e["processor_payment_intent_id"] for e in succeeded] == [intent]
    assert succeeded[0]["settlement"] == "processor_deposit"
    # the same token after payment: the same session, nothing new
    assert _start(it, token).headers["location"] == checkout_url


def test_a_redelivered_completion_books_once(server: LiveServer, stripe_double: Any) -> None:
    it = item(server, environment="live", amount="2.00")
    cs = _session_of(_start(it).headers["location"])
    stripe_double.pay_checkout(cs, PAYING)
    until(lambda: _checkout(server, cs).receipt_id)
    [completed] = _settled(stripe_double, "checkout.session.completed")
    stripe_double.redeliver(completed["event"])
    _settled(stripe_double, "checkout.session.completed", 2)
    # and the same session under a new event id (Stripe may send it again as a new event)
    session = httpx.get(
        f"{stripe_double.api_base.rstrip('/')}/v1/checkout/sessions/{cs}",
        headers={"Authorization": "Bearer sk_test_cards"},
    ).json()
    assert session["payment_status"] == "paid"
    answer = deliver(server.url, event("checkout.session.completed", session))
    assert answer.status_code == 200, answer.text
    assert it.payments() == 1
    assert len(_events(server, "payment.succeeded")) == 1


def test_a_declined_card_books_nothing_and_another_card_then_pays(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live", amount="3.00")
    cs = _session_of(_start(it).headers["location"])
    refused = stripe_double.pay_checkout(cs, DECLINED)
    assert refused["paid"] is False
    row = until(lambda: (r := _checkout(server, cs)).status == "failed" and r)
    assert row.failure_reason and "decline" in row.failure_reason
    assert row.receipt_id is None and it.payments() == 0
    page = httpx.get(f"{it.pay_url}/done?session={cs}")
    assert "declined" in page.text and "nothing was charged" in page.text
    # Checkout lets the payer try another card on the same session
    assert stripe_double.pay_checkout(cs, PAYING)["paid"] is True
    until(lambda: _checkout(server, cs).receipt_id)
    assert it.payments() == 1


def test_an_abandoned_checkout_books_nothing(server: LiveServer, stripe_double: Any) -> None:
    it = item(server, environment="live", amount="3.00")
    cs = _session_of(_start(it).headers["location"])
    stripe_double.abandon_checkout(cs)
    until(lambda: _checkout(server, cs).status == "expired")
    assert it.payments() == 0
    page = httpx.get(f"{it.pay_url}/done?session={cs}")
    assert "not completed" in page.text
    unknown = httpx.get(f"{it.pay_url}/done?session=cs_nobody")
    assert unknown.status_code == 404


def test_a_price_in_fractions_of_a_cent_is_not_offered_by_card(server: LiveServer) -> None:
    it = item(server, environment="live", amount="1.005")
    page = httpx.get(it.pay_url)
    assert "whole cents" in page.text and "Pay with card" not in page.text


def test_a_card_top_up_is_pending_then_credited_once(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live")
    jwt, owner_id = it.acct.owner_jwt, it.acct.owner_id
    client = owner_client(server.url, jwt, "live")
    top_up = client.top_ups.create("25.00", method="card")
    assert (top_up.status, top_up.method, top_up.rail, top_up.tx_hash) == (
        "pending",
        "card",
        "card",
        None,
    )
    assert top_up.checkout_url is not None
    cs = _session_of(top_up.checkout_url)
    assert client.top_ups.get(top_up.id).checkout_url == top_up.checkout_url
    assert [t.id for t in client.top_ups.list().data] == [top_up.id]
    assert account_wallet(server, owner_id, "live") == 0
    done = httpx.get(f"{server.url}/top-ups/{top_up.id}/done")
    assert "confirming" in done.text

    paid = stripe_double.pay_checkout(cs, PAYING)
    intent = paid["object"]["payment_intent"]
    credited = until(lambda: (u := client.top_ups.get(top_up.id)).status == "succeeded" and u)
    assert credited.tx_hash == intent and credited.checkout_url is None
    assert account_wallet(server, owner_id, "live") == 25_000_000
    [completed] = _settled(stripe_double, "checkout.session.completed")
    stripe_double.redeliver(completed["event"])
    _settled(stripe_double, "checkout.session.completed", 2)
    assert account_wallet(server, owner_id, "live") == 25_000_000
    funded = _events(server, "funding.paid")
    assert len(funded) == 1
    assert funded[0]["source"] == "card" and funded[0]["top_up_id"] == top_up.id
    assert funded[0]["processor_payment_intent_id"] == intent
    assert funded[0]["account_wallet_balance"] == "25.00"
    assert "credited" in httpx.get(f"{server.url}/top-ups/{top_up.id}/done").text


def test_a_card_top_up_key_answers_the_same_top_up(server: LiveServer) -> None:
    it = item(server, environment="live")
    headers = owner_headers(it.acct.owner_jwt, "live", **{"Idempotency-Key": "card-1"})
    body = {"amount": "5.00", "method": "card"}
    first = httpx.post(server.url + "/owners/me/top-ups", json=body, headers=headers)
    again = httpx.post(server.url + "/owners/me/top-ups", json=body, headers=headers)
    assert first.status_code == again.status_code == 201, first.text
    assert first.json()["id"] == again.json()["id"]
    assert first.json()["checkout_url"] == again.json()["checkout_url"]
    assert again.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("outcome", ["declined", "abandoned"])
def test_an_unpaid_card_top_up_credits_nothing(
    server: LiveServer, stripe_double: Any, outcome: str
) -> None:
    it = item(server, environment="live")
    client = owner_client(server.url, it.acct.owner_jwt, "live")
    top_up = client.top_ups.create("7.00", method="card")
    assert top_up.checkout_url is not None
    cs = _session_of(top_up.checkout_url)
    if outcome == "declined":
        stripe_double.pay_checkout(cs, DECLINED)
    else:
        stripe_double.abandon_checkout(cs)
    status = "failed" if outcome == "declined" else "expired"
    until(lambda: client.top_ups.get(top_up.id).status == status)
    assert account_wallet(server, it.acct.owner_id, "live") == 0
    assert _events(server, "funding.paid") == []


def test_card_top_ups_refuse_what_a_card_cannot_pay(server: LiveServer) -> None:
    it = item(server, environment="live")
    path = server.url + "/owners/me/top-ups"
    for amount in ("5.005", "0.20"):
        answer = httpx.post(
            path,
            json={"amount": amount, "method": "card"},
            headers=owner_headers(it.acct.owner_jwt, "live"),
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "validation_error"


def test_a_person_pays_by_card_in_a_browser(
    server: LiveServer, stripe_double: Any, page: Any, tmp_path: Path
) -> None:
    """Pay page -> the processor's checkout page -> back to our receipt page."""
    it = item(server, environment="live", amount="6.00")
    page.goto(it.pay_url)
    page.get_by_role("button", name="Pay with card").click()
    page.wait_for_load_state()
    assert page.url.startswith(stripe_double.api_base.rstrip("/") + "/_double/checkout/cs_")
    cs = _session_of(page.url)
    page.get_by_role("button", name="Pay").click()
    page.wait_for_load_state()
    assert page.url == f"{it.pay_url}/done?session={cs}"
    until(lambda: _checkout(server, cs).receipt_id)
    page.reload()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=1).inner_text() == "Payment received"
    receipt_id = str(page.locator("#receipt-id").inner_text())
    assert receipt_id == _checkout(server, cs).receipt_id
    page.screenshot(path=str(tmp_path / "card-checkout-receipt.png"), full_page=True)
    assert it.verify(receipt_id)["valid"] is True and it.payments() == 1


def test_completions_of_one_session_at_once_book_once(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live", amount="2.00")
    cs = _session_of(_start(it).headers["location"])
    # paid while the double's events go elsewhere; then six events of it arrive at once
    sink = stripe_double.api_base.rstrip("/") + "/_double/sink"
    stripe_double.set_webhook(sink, "whsec_elsewhere")
    assert stripe_double.pay_checkout(cs, PAYING)["paid"] is True
    session = httpx.get(
        f"{stripe_double.api_base.rstrip('/')}/v1/checkout/sessions/{cs}",
        headers={"Authorization": "Bearer sk_test_cards"},
    ).json()
    events = [event("checkout.session.completed", session) for _ in range(6)]
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda body: deliver(server.url, body), events))
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert it.payments() == 1
    assert _checkout(server, cs).receipt_id is not None
    assert len(_events(server, "payment.succeeded")) == 1


def test_the_processor_failing_is_retried_and_then_said(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live", amount="2.00")
    token = token_of(httpx.get(it.pay_url).text)
    stripe_double.fault("/v1/checkout/sessions", 503, times=3)  # beyond the SDK's 2 retries
    down = _start(it, token)
    assert down.status_code == 503 and "nothing was charged" in down.text
    tried = _session_posts(stripe_double)
    assert len(tried) == 3 and len({r["idempotency_key"] for r in tried}) == 1
    stripe_double.fault("/v1/checkout/sessions", 500, times=1)  # one blip: retried
    up = _start(it, token)  # the same form again: the same checkout, now opened
    assert up.status_code == 303, up.text
    keys = {r["idempotency_key"] for r in _session_posts(stripe_double)}
    assert keys == {tried[0]["idempotency_key"]}
    assert it.payments() == 0

    client_headers = owner_headers(it.acct.owner_jwt, "live")
    stripe_double.fault("/v1/checkout/sessions", 503, times=3)
    answer = httpx.post(
        server.url + "/owners/me/top-ups",
        json={"amount": "5.00", "method": "card"},
        headers=client_headers,
    )
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "settlement_unavailable"
    assert account_wallet(server, it.acct.owner_id, "live") == 0
    # without an Idempotency-Key no retry can open it: it is failed, not left pending
    listed = owner_client(server.url, it.acct.owner_jwt, "live").top_ups.list().data
    assert [(u.status, u.checkout_url) for u in listed] == [("failed", None)]
    # with one, the retry opens the same top-up's checkout
    keyed = {**client_headers, "Idempotency-Key": "card-retry"}
    stripe_double.fault("/v1/checkout/sessions", 503, times=3)
    body = {"amount": "5.00", "method": "card"}
    refused = httpx.post(server.url + "/owners/me/top-ups", json=body, headers=keyed)
    assert refused.status_code == 503
    opened = httpx.post(server.url + "/owners/me/top-ups", json=body, headers=keyed)
    assert opened.status_code == 201, opened.text
    assert opened.json()["status"] == "pending" and opened.json()["checkout_url"]


def test_a_refund_at_the_processor_is_recorded_and_books_nothing(
    server: LiveServer, stripe_double: Any
) -> None:
    it = item(server, environment="live", amount="2.00")
    cs = _session_of(_start(it).headers["location"])
    intent = stripe_double.pay_checkout(cs, PAYING)["object"]["payment_intent"]
    until(lambda: _checkout(server, cs).receipt_id)
    balance = it.balance()
    stripe_double.client("sk_test_cards").v1.refunds.create({"payment_intent": intent})
    _settled(stripe_double, "charge.refunded")
    row = _checkout(server, cs)
    assert row.refunded_at is not None and row.status == "complete"
    assert it.payments() == 1 and it.balance() == balance  # refunds are booked by issue 28


def test_the_cli_tops_up_by_card_and_prints_where_to_pay(server: LiveServer) -> None:
    it = item(server, environment="live")
    env = {
        **os.environ,
        "SVC_BASE_URL": server.url,
        "SVC_OWNER_JWT": it.acct.owner_jwt,
        "SVC_ENVIRONMENT": "live",
    }
    cli = [sys.executable, "-m", "svc.cli", "top-up", "5.00"]
    done = subprocess.run([*cli, "--card"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["status"] == "pending" and printed["method"] == "card"
    assert "/_double/checkout/cs_" in printed["checkout_url"]
    neither = subprocess.run(cli, capture_output=True, text=True, timeout=60, env=env)
    assert neither.returncode != 0 and "--card" in neither.stderr

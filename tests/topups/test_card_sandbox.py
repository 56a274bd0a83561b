"""Card top-ups in ``test``: the same flow as live's Checkout, paid on the sandbox's own
checkout page with the sandbox card form -- pending, then credited once, ``funding.paid``
with ``source`` ``card``; a declined card or another site's POST credits nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select

from reference_server.store import tables as t
from reference_server.web import idempotency

from ..buypage.helpers import BROWSER, DECLINED, FUTURE, PAYING
from ..support import Account, LiveServer
from .helpers import PATH, account_wallet, owner_client, owner_headers


def _card(url: str, number: str, headers: dict[str, str] = BROWSER) -> httpx.Response:
    form = {"token": "", "number": number, "expiry": FUTURE, "cvc": "123"}
    return httpx.post(url, data=form, headers=headers)


def _funding(live: LiveServer) -> list[dict[str, object]]:
    ev = t.events
    with live.ctx.db.read() as conn:
        rows = conn.execute(select(ev.c.data).where(ev.c.type == "funding.paid")).all()
    return [dict(r.data) for r in rows]


def test_a_card_top_up_is_paid_on_the_sandbox_checkout_page(
    server: LiveServer, account: Account
) -> None:
    client = owner_client(server.url, account.owner_jwt)
    top_up = client.top_ups.create("25.00", method="card")
    assert (top_up.status, top_up.method, top_up.tx_hash) == ("pending", "card", None)
    url = f"{server.url}/top-ups/{top_up.id}/pay"
    assert top_up.checkout_url == url
    assert client.top_ups.get(top_up.id).checkout_url == url

    page = httpx.get(url)
    assert page.status_code == 200 and "25.00 USD" in page.text
    assert '<label for="number">Card number</label>' in page.text
    refused = _card(url, PAYING, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403
    declined = _card(url, DECLINED)
    assert declined.status_code == 402 and "was declined" in declined.text
    assert account_wallet(server, account.owner_id, "test") == 0
    assert client.top_ups.get(top_up.id).status == "pending"

    paid = _card(url, PAYING)
    assert paid.status_code == 303
    assert paid.headers["location"] == f"{server.url}/top-ups/{top_up.id}/done"
    assert "credited" in httpx.get(paid.headers["location"]).text
    again = _card(url, PAYING)  # the form resent: credited already, nothing more
    assert again.status_code == 303
    credited = client.top_ups.get(top_up.id)
    assert credited.status == "succeeded" and credited.checkout_url is None
    assert credited.tx_hash is not None and credited.tx_hash.startswith("pi_")
    assert account_wallet(server, account.owner_id, "test") == 25_000_000
    funded = _funding(server)
    assert len(funded) == 1 and funded[0]["source"] == "card"
    assert funded[0]["processor_payment_intent_id"] == credited.tx_hash


def test_the_sandbox_checkout_serves_only_test_card_top_ups(server: LiveServer) -> None:
    assert httpx.get(f"{server.url}/top-ups/tu_nobody/pay").status_code == 404
    assert _card(f"{server.url}/top-ups/tu_nobody/pay", PAYING).status_code == 404


def test_a_card_top_ups_key_answers_it_for_good_and_refuses_another_request(
    server: LiveServer, account: Account
) -> None:
    headers = owner_headers(account.owner_jwt, **{"Idempotency-Key": "card-k"})
    body = {"amount": "5.00", "method": "card"}
    first = httpx.post(server.url + PATH, json=body, headers=headers)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    # Past the store's TTL: the record a top-up references is kept, and still answers it.
    ttl = timedelta(seconds=server.settings.idempotency_ttl_seconds)
    idempotency.purge_expired(server.ctx.db, now=datetime.now(UTC) + 2 * ttl, ttl=ttl)
    again = httpx.post(server.url + PATH, json={"amount": "5", "method": "card"}, headers=headers)
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == first.json()["id"] and again.json()["status"] == "pending"
    for other in ({"amount": "6.00", "method": "card"}, {"amount": "5.00"}):
        reused = httpx.post(server.url + PATH, json=other, headers=headers)
        assert reused.status_code == 422, reused.text
        assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert len(owner_client(server.url, account.owner_jwt).top_ups.list().data) == 1

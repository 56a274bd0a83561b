"""The buy page at every ``pay_url``, as a browser's HTTP sees it: what is sold, the
sandbox card form, a payment booked once, refusals said clearly, 404 and 410 as HTML, and
the old ``/pay/{short_id}`` addresses redirected here."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal

import httpx
import pytest

from reference_server.domain import card_payments, resources
from reference_server.domain.errors import DomainError
from reference_server.settings import utcnow
from svc import webhooks

from ..support import LiveServer
from ..webhooks.receiver import start_receiver
from .helpers import (
    BROWSER,
    DECLINED,
    FUTURE,
    PAYING,
    item,
    pay,
    pay_by_card,
    receipt_of,
    token_of,
)


def test_page_shows_what_is_sold_and_a_labelled_card_form(server: LiveServer) -> None:
    it = item(server)
    assert it.pay_url == f"{server.url}/buy/{it.resource['short_id']}"
    r = httpx.get(it.pay_url)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none'
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["referrer-policy"] == "same-origin"
    html = r.text
    assert '<html lang="en">' in html and html.count("<h1>") == 1
    assert "Monthly weather report" in html and "2.50 USD" in html and "shop" in html
    for field, label in (("number", "Card number"), ("expiry", "Expiry"), ("cvc", "CVC")):
        assert f'<label for="{field}">{label}</label>' in html
        assert f'id="{field}" name="{field}"' in html
    assert '<button type="submit">Pay 2.50 USD</button>' in html
    assert "<script" not in html
    # the API keeps answering JSON at /pay, and the page is also under /api
    assert httpx.get(server.url + "/api/buy/" + it.resource["short_id"]).status_code == 200


def test_sandbox_card_pays_once_and_the_receipt_verifies(
    make_server: Callable[..., LiveServer],
) -> None:
    receiver = start_receiver()
    try:
        live = make_server(worker_poll_seconds=0.05)
        it = item(live, amount="10.00")
        secret = it.subscribe(receiver.url)
        r = pay(it)
        assert r.status_code == 200, r.text
        assert "Payment received" in r.text and "10.00 USD" in r.text
        receipt_id = receipt_of(r.text)
        verified = it.verify(receipt_id)
        assert verified["valid"] is True and verified["amount"] == "10.00"
        assert verified["rail"] == "card"
        # and it unlocks the resource's hosted gate, like any receipt for it
        gate = httpx.get(it.resource["gate_url"], headers={"X-Svc-Receipt": receipt_id})
        assert gate.status_code == 200, gate.text
        assert httpx.get(it.resource["gate_url"]).status_code == 402
        assert it.balance() == Decimal("9.90")  # the platform fee (1 %) taken
        assert it.payments() == 1

        got = receiver.wait_for(1)
        event = webhooks.verify(secret, got[0].body, got[0].headers)
        assert event.type == "payment.succeeded"
        data = event.data
        assert getattr(data, "receipt_id", None) == receipt_id
        assert getattr(data, "settlement", None) == "processor_deposit"
        assert getattr(data, "rail", None) == "card"
        assert str(getattr(data, "platform_fee", "")) == "0.10"
    finally:
        receiver.server.shutdown()


def test_a_double_submit_pays_once(server: LiveServer) -> None:
    it = item(server)
    token = token_of(httpx.get(it.pay_url).text)
    first = pay(it, token=token)
    again = pay(it, token=token)  # a reload resends the POST
    assert first.status_code == again.status_code == 200
    assert receipt_of(first.text) == receipt_of(again.text)
    # a double click: both submits of one form race; one pays, both show its receipt
    other = token_of(httpx.get(it.pay_url).text)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: pay(it, token=other), range(4)))
    assert {a.status_code for a in answers} == {200}
    assert len({receipt_of(a.text) for a in answers}) == 1
    assert it.payments() == 2
    assert it.balance() == Decimal("4.95")  # 2 x (2.50 - the 0.025 fee)


def test_declined_and_mistyped_cards_are_told_clearly_and_charge_nothing(
    server: LiveServer,
) -> None:
    it = item(server)
    token = token_of(httpx.get(it.pay_url).text)
    declined = pay(it, number=DECLINED, token=token)
    assert declined.status_code == 402
    assert "ending in 0002 was declined, and nothing was charged" in declined.text
    assert 'role="alert"' in declined.text
    cases = {
        ("4242 4242 4242 4241", FUTURE, "123"): "not valid: check it for a typo",
        ("4242", FUTURE, "123"): "12 to 19 digits",
        ("", FUTURE, "123"): "Enter the card number.",
        ("5555 5555 5555 4444", FUTURE, "123"): "only its test cards",
        (PAYING, "01/20", "123"): "This card expired at the end of 01/20",
        (PAYING, "13/39", "123"): "month should be 01 to 12",
        (PAYING, "1239", "123"): "Write the expiry date as MM/YY",
        (PAYING, FUTURE, "12"): "3 or 4 digit security code",
    }
    for (number, expiry, cvc), message in cases.items():
        r = pay(it, number=number, expiry=expiry, cvc=cvc, token=token)
        assert r.status_code == 422, (number, expiry, cvc, r.text)
        assert message in r.text, (number, expiry, cvc)
        assert 'aria-invalid="true"' in r.text
        assert token_of(r.text) == token  # the same form, to correct
    assert it.payments() == 0 and it.balance() == 0
    # the refusals left the form's token unused: corrected, it pays
    paid = pay(it, token=token)
    assert paid.status_code == 200 and receipt_of(paid.text)
    assert it.payments() == 1


def test_a_forged_or_cross_site_form_is_refused(server: LiveServer) -> None:
    it = item(server)
    token = token_of(httpx.get(it.pay_url).text)
    other = item(server)
    assert pay(other, token=token).status_code == 403  # bound to its resource
    assert pay(it, token="").status_code == 403
    assert pay(it, token=token[:-1] + "x").status_code == 403
    for headers in (
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},  # no fetch metadata: the origin decides
        {"Origin": "null"},
    ):
        r = pay(it, token=token, headers=headers)
        assert r.status_code == 403, headers
        assert "must be sent from its own page" in r.text
    # a client that is no browser (no Origin, no fetch metadata) is not a cross-site form
    assert pay(it, token=token, headers={}).status_code == 200
    assert it.payments() == 1
    r = httpx.post(it.pay_url, json={"token": token})
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/html")


def test_unknown_page_is_404_and_deactivated_410_as_html(server: LiveServer) -> None:
    r = httpx.get(server.url + "/buy/nosuchpage")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "There is no payment page at this address" in r.text
    it = item(server)
    token = token_of(httpx.get(it.pay_url).text)
    it.deactivate()
    r = httpx.get(it.pay_url)
    assert r.status_code == 410 and r.headers["content-type"].startswith("text/html")
    assert "No longer for sale" in r.text and "can no longer be paid for" in r.text
    assert "<form" not in r.text
    r = pay(it, token=token)
    assert r.status_code == 410 and it.payments() == 0


def test_live_says_a_processor_is_needed(server: LiveServer) -> None:
    it = item(server, environment="live")
    r = httpx.get(it.pay_url)
    assert r.status_code == 200
    assert "needs a configured payment processor" in r.text
    assert "<form" not in r.text and "Card number" not in r.text
    r = httpx.post(
        it.pay_url,
        data={"token": "x", "number": PAYING, "expiry": FUTURE, "cvc": "123"},
        headers={"Origin": server.url},
    )
    assert r.status_code == 409 and "needs a configured payment processor" in r.text
    assert it.payments() == 0
    # no description: the path; a seller's text is escaped, never markup
    bare = httpx.get(item(server, description=None).pay_url).text
    assert '<dd id="description">/v1/report</dd>' in bare
    hostile = httpx.get(item(server, description="<script>x()</script>").pay_url).text
    assert "<script>" not in hostile and "&lt;script&gt;x()&lt;/script&gt;" in hostile


def test_an_expired_form_charges_nothing_and_comes_back_fresh(
    make_server: Callable[..., LiveServer],
) -> None:
    now = [utcnow()]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**8)
    it = item(live)
    stale = token_of(httpx.get(it.pay_url).text)
    paid_token = token_of(httpx.get(it.pay_url).text)
    paid = pay(it, token=paid_token)
    now[0] += timedelta(hours=2)
    r = pay(it, token=stale)
    assert r.status_code == 422 and "This form had expired, and nothing was charged" in r.text
    fresh = token_of(r.text)
    assert fresh != stale and it.payments() == 1
    # a form that already paid still shows its receipt after its token expired
    assert receipt_of(pay(it, token=paid_token).text) == receipt_of(paid.text)
    assert receipt_of(pay(it, token=fresh).text) != receipt_of(paid.text)
    assert it.payments() == 2


def test_old_pay_addresses_redirect_and_an_open_form_still_pays_once(server: LiveServer) -> None:
    it = item(server)
    short_id = it.resource["short_id"]
    token = token_of(httpx.get(it.pay_url).text)
    for old, new in (
        (f"/pay/{short_id}", f"/buy/{short_id}"),
        (f"/api/pay/{short_id}?x=1&y=%C3%A9", f"/api/buy/{short_id}?x=1&y=%C3%A9"),
        (f"/pay/{short_id}/done?session=cs_1", f"/buy/{short_id}/done?session=cs_1"),
    ):
        r = httpx.get(server.url + old, headers={"Host": "evil.example"})
        assert r.status_code == 308 and r.headers["location"] == new, old
    # a form opened before the move posts to the old address: resent there, paid once
    old_form = it.pay_url.replace("/buy/", "/pay/")
    first = httpx.post(
        old_form,
        data={"token": token, "number": PAYING, "expiry": FUTURE, "cvc": "123"},
        headers=BROWSER,
    )
    assert first.status_code == 308 and first.headers["location"] == f"/buy/{short_id}"
    paid = pay_by_card(it.pay_url, token=token)
    assert receipt_of(paid.text) and it.payments() == 1
    with httpx.Client(follow_redirects=True) as client:  # resent, as a browser does
        again = client.post(
            old_form,
            data={"token": token, "number": PAYING, "expiry": FUTURE, "cvc": "123"},
            headers=BROWSER,
        )
    assert again.status_code == 200 and receipt_of(again.text) == receipt_of(paid.text)
    assert it.payments() == 1
    # POST /pay is still the agents' JSON API, not a redirect
    r = httpx.post(server.url + "/pay", json={"resource_id": it.resource["id"]})
    assert r.status_code == 401 and r.headers["content-type"] == "application/json"


METERED = {"pricing": "metered", "unit_price": "0.0001", "unit": "token", "max_amount": "5.00"}


def test_a_metered_resource_is_sold_by_card_at_its_fallback_price_only(
    server: LiveServer,
) -> None:
    priced_by_use = item(server, pricing=METERED)
    page = httpx.get(priced_by_use.pay_url)
    assert page.status_code == 200 and "cannot be bought by card here" in page.text
    assert 'name="token"' not in page.text  # no card form
    refused = pay(priced_by_use, token="anything")
    assert refused.status_code == 409 and "cannot be bought by card here" in refused.text
    assert priced_by_use.payments() == 0
    # the booking itself refuses it too, in the envelope's code
    with server.ctx.db.write() as conn, pytest.raises(DomainError) as metered:
        row = resources.find_any_resource(conn, priced_by_use.resource["id"])
        card_payments.book_card_sale(
            conn, resource=row, fee_bps=100, request_id="req_x", now=utcnow()
        )
    assert metered.value.code == "resource_metered"

    with_fallback = item(server, pricing={**METERED, "fallback_amount": "0.75"})
    assert "Pay 0.75 USD" in httpx.get(with_fallback.pay_url).text
    paid = pay(with_fallback)
    assert paid.status_code == 200 and "0.75 USD" in paid.text
    assert with_fallback.verify(receipt_of(paid.text))["amount"] == "0.75"

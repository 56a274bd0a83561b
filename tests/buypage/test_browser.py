"""The buy page in a real browser (headless Debian chromium): a person fills the card form
by its labels and presses **Pay**, with and without JavaScript.  Screenshots are kept in
``$SVC_TEST_ARTIFACTS`` (default: the test's temporary folder)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from svc import webhooks

from ..support import LiveServer
from ..webhooks.receiver import start_receiver
from .helpers import DECLINED, FUTURE, PAYING, Item, item


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SVC_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def fill_and_pay(page: Any, *, number: str = PAYING, expiry: str = FUTURE) -> None:
    page.get_by_label("Card number").fill(number)
    page.get_by_label("Expiry").fill(expiry)
    page.get_by_label("CVC").fill("314")
    page.get_by_role("button", name="Pay").click()
    page.wait_for_load_state()


def receipt_on(page: Any) -> str:
    text = str(page.locator("#receipt-id").inner_text())
    assert re.fullmatch(r"rcpt_[0-9A-Za-z]+", text), text
    return text


def test_a_person_pays_with_the_sandbox_card(
    make_server: Callable[..., LiveServer], page: Any, artifacts: Path
) -> None:
    receiver = start_receiver()
    try:
        live = make_server(worker_poll_seconds=0.05)
        it = item(live, amount="4.00")
        secret = it.subscribe(receiver.url)

        page.goto(it.pay_url)
        assert page.get_by_role("heading", level=1).inner_text() == "Pay shop"
        assert page.get_by_text("Monthly weather report").is_visible()
        assert page.get_by_text("4.00 USD", exact=True).is_visible()
        page.screenshot(path=str(artifacts / "buy-page-form.png"), full_page=True)
        fill_and_pay(page)
        assert page.get_by_role("heading", level=1).inner_text() == "Payment received"
        receipt_id = receipt_on(page)
        page.screenshot(path=str(artifacts / "buy-page-receipt.png"), full_page=True)

        verified = it.verify(receipt_id)
        assert verified["valid"] is True and verified["amount"] == "4.00"
        assert it.balance() == Decimal("3.96")
        got = receiver.wait_for(1)
        event = webhooks.verify(secret, got[0].body, got[0].headers)
        assert event.type == "payment.succeeded"
        assert getattr(event.data, "receipt_id", None) == receipt_id
        assert getattr(event.data, "settlement", None) == "processor_deposit"

        # the browser resends the form (reload of the POST): the same receipt, paid once
        page.reload()
        page.wait_for_load_state()
        assert receipt_on(page) == receipt_id
        assert it.payments() == 1
    finally:
        receiver.server.shutdown()


def test_declined_card_then_the_paying_card(server: LiveServer, page: Any, artifacts: Path) -> None:
    it = item(server)
    page.goto(it.pay_url)
    fill_and_pay(page, number=DECLINED)
    alert = page.get_by_role("alert")
    assert "The card ending in 0002 was declined, and nothing was charged" in alert.inner_text()
    page.screenshot(path=str(artifacts / "buy-page-declined.png"), full_page=True)
    assert it.payments() == 0
    # a refused card is not shown back: its number and CVC are typed again
    assert page.get_by_label("Card number").input_value() == ""
    assert page.get_by_label("CVC").input_value() == ""
    fill_and_pay(page, expiry="01/20")
    assert "This card expired" in page.get_by_role("alert").inner_text()
    fill_and_pay(page)
    receipt_on(page)
    assert it.payments() == 1


def test_the_page_works_without_javascript(
    browser: Any, server: LiveServer, artifacts: Path
) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        it = item(server)
        page.goto(it.pay_url)
        fill_and_pay(page)
        receipt_id = receipt_on(page)
        assert it.verify(receipt_id)["valid"] is True
    finally:
        context.close()


def test_the_button_says_what_it_pays_and_the_receipt_what_to_do(
    server: LiveServer, page: Any, artifacts: Path
) -> None:
    it = item(server, amount="0.05")
    page.goto(it.pay_url)
    assert page.get_by_role("button", name="Pay 0.05 USD", exact=True).is_visible()
    fill_and_pay(page)
    receipt_on(page)
    page.screenshot(path=str(artifacts / "buy-page-receipt-small.png"), full_page=True)
    next_step = page.locator("#next").inner_text()
    assert next_step.startswith("Keep this receipt id") and "/" not in next_step
    page.get_by_role("link", name="Back to the payment page").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", level=1).inner_text() == "Pay shop"


def test_gone_unknown_and_live_pages(server: LiveServer, page: Any, artifacts: Path) -> None:
    it: Item = item(server)
    it.deactivate()
    answer = page.goto(it.pay_url)
    assert answer.status == 410
    assert page.get_by_role("heading", level=1).inner_text() == "No longer for sale"
    page.screenshot(path=str(artifacts / "buy-page-gone.png"), full_page=True)
    answer = page.goto(server.url + "/buy/unknown123")
    assert answer.status == 404
    assert page.get_by_role("heading", level=1).inner_text() == "Payment page not found"
    live_item = item(server, environment="live")
    answer = page.goto(live_item.pay_url)
    assert answer.status == 200
    assert "needs a configured payment processor" in page.content()
    assert page.get_by_role("button", name="Pay").count() == 0

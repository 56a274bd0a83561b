"""The approval page decided by a person in a real browser (headless Debian chromium
driven by Playwright, JavaScript off) against a real server on loopback: one pay-url is
approved and pays once on the repeat, another is declined and releases its hold."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from ..payurl.helpers import make_agent
from ..support import LiveServer
from .helpers import PaidCounter, pay_url

if TYPE_CHECKING:
    from playwright.sync_api import Browser

expect = pytest.importorskip(
    "playwright.sync_api", reason="browser tests need the playwright package"
).expect

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_a_person_approves_one_and_declines_another(
    server: LiveServer, seller: PaidCounter, browser: Browser
) -> None:
    agent = make_agent(server, approval_above="0.10", budget="2.00")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        asked = pay_url(server, agent.wallet_key, seller.url, "first")
        assert asked.status_code == 202, asked.text
        shown = page.goto(asked.json()["approval_url"])
        assert shown is not None and shown.headers["cache-control"] == "no-store"
        expect(page.locator("#key-name")).to_have_text("agent")
        expect(page.locator("#what")).to_contain_text(seller.url)
        expect(page.locator("#amount")).to_have_text("0.25 USD")
        expect(page.locator("#budget")).to_have_text("1.75 USD")  # the hold counts
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("heading")).to_have_text("Payment approved")

        paid = pay_url(server, agent.wallet_key, seller.url, "first")
        assert paid.status_code == 200, paid.text
        replay = pay_url(server, agent.wallet_key, seller.url, "first")
        assert replay.json()["receipt_id"] == paid.json()["receipt_id"]
        assert seller.paid == 1
        assert agent.spend().balance == Decimal("9.75")

        second = pay_url(server, agent.wallet_key, seller.url, "second").json()
        assert agent.spend().balance == Decimal("9.50")  # held
        page.goto(second["approval_url"])
        page.get_by_role("button", name="Decline").click()
        expect(page.get_by_role("heading")).to_have_text("Payment declined")
        refused = pay_url(server, agent.wallet_key, seller.url, "second")
        assert refused.status_code == 402
        assert refused.json()["error"]["code"] == "approval_declined"
        back = agent.spend()
        assert back.balance == Decimal("9.75") and back.remaining_budget == Decimal("1.75")
        assert seller.paid == 1

        page.goto(second["approval_url"])  # one decision only
        expect(page.get_by_role("heading")).to_have_text("Already decided")
    finally:
        context.close()

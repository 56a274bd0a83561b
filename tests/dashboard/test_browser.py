"""The dashboard in a real browser (headless chromium): sign in through the one-time link,
see the sales chart, refund a payment and retry a failed webhook delivery; set up payouts,
withdraw and follow the withdrawal until it is paid; set up live payouts on the
processor's own onboarding page (another origin, which the page's CSP must allow); read
a wallet key's spend meter and open a pending approval's page; all by the controls'
labels.
Screenshots are kept in ``$SVC_TEST_ARTIFACTS`` (default: the test's temporary folder)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..approvals.test_pay_approval import pay, setup
from ..money.helpers import market
from ..payouts.helpers import FAST_PAYOUTS, shop
from ..processor.test_connect import live, live_seller  # noqa: F401  (live: a fixture)
from ..stripe_double.running import StripeDouble
from ..support import LiveServer, until
from ..webhooks.receiver import start_receiver
from .helpers import hook, link


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SVC_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_an_owner_signs_in_refunds_and_retries(
    make_server: Callable[..., LiveServer], page: Any, artifacts: Path
) -> None:
    receiver = start_receiver()
    receiver.statuses = [500]  # the first delivery fails, the next ones are answered 200
    try:
        # the worker would retry the failed delivery by itself only in 10 minutes
        served = make_server(worker_poll_seconds=0.05, webhook_retry_schedule=(600, 600))
        m = market(served)
        hook(served, m.seller_owner_jwt, receiver.url)
        first = m.agent.pay(resource_id=m.resource.id)
        second = m.agent.pay(resource_id=m.resource.id)
        receiver.wait_for(1)

        page.goto(link(served, m.seller_owner_jwt))
        assert page.url == f"{served.url}/dashboard"
        assert page.get_by_role("heading", level=1).inner_text() == "Dashboard"
        chart = page.locator("svg#sales-chart")
        assert chart.is_visible()
        assert chart.locator("rect.bar").count() >= 1  # today's bar (two sales, one rail)
        assert "2.00" in page.locator("#sales-table").inner_text()
        assert "1.98" in page.locator("#sellers").inner_text()
        page.screenshot(path=str(artifacts / "dashboard-overview.png"), full_page=True)

        page.get_by_role("link", name="Payments").click()
        row = page.locator(f"#payment-{first.receipt_id}")
        assert row.locator(".state").inner_text() == "settled"
        row.get_by_role("button", name="Refund").click()
        page.wait_for_load_state()
        row = page.locator(f"#payment-{first.receipt_id}")
        assert row.locator(".state").inner_text() == "refunded"
        assert row.get_by_role("button").count() == 0
        other = page.locator(f"#payment-{second.receipt_id}")
        assert other.locator(".state").inner_text() == "settled"
        page.screenshot(path=str(artifacts / "dashboard-payments.png"), full_page=True)
        state = httpx.get(
            f"{served.url}/payments/{first.receipt_id}",
            headers={"Authorization": f"Bearer {m.seller_key}"},
        )
        assert state.json()["state"] == "refunded"

        page.get_by_role("link", name="Webhooks").click()
        failed = page.locator("tr", has_text="500").first
        assert failed.locator(".status").inner_text() == "pending"
        failed.get_by_role("button", name="Retry").click()
        page.wait_for_load_state()
        until(lambda: len(receiver.received) >= 2, "the retried delivery did not arrive")
        statuses = page.locator(".status").all_inner_texts()
        assert "succeeded" in statuses, statuses
        page.screenshot(path=str(artifacts / "dashboard-webhooks.png"), full_page=True)
    finally:
        receiver.server.shutdown()


def test_an_owner_sets_up_payouts_withdraws_and_follows_it(
    make_server: Callable[..., LiveServer], page: Any, artifacts: Path
) -> None:
    served = make_server(**FAST_PAYOUTS)
    s = shop(served)  # a balance of 9.90 from one sale
    page.goto(link(served, s.acct.owner_jwt))
    page.get_by_role("link", name="Payouts").click()
    assert page.locator("#connect-status .status").inner_text() == "not_started"
    page.get_by_label("Country of the payout account").select_option("US")
    page.get_by_role("button", name="Set up payouts").click()
    # the sandbox's onboarding page, as a person completes it
    assert page.get_by_role("heading", level=1).inner_text() == "Set up payouts"
    page.get_by_label("Legal name of the account holder").fill("Ada Lovelace")
    page.get_by_label("payouts succeed").check()
    page.get_by_label("I accept the sandbox terms of service").check()
    page.get_by_role("button", name="Complete onboarding").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Onboarding complete"

    page.goto(f"{served.url}/dashboard/payouts")
    page.get_by_role("button", name="Refresh status").click()
    page.wait_for_load_state()
    assert page.locator("#connect-status .status").inner_text() == "enabled"
    page.get_by_label("Amount (USD; leave empty for the whole available balance)").fill("4.00")
    page.get_by_role("button", name="Withdraw").click()
    page.wait_for_load_state()
    assert page.get_by_role("status").is_visible()
    row = page.locator("#withdrawals tbody tr").first
    assert row.locator(".amount").inner_text() == "4.00"
    assert row.locator(".status").inner_text() in ("pending", "in_transit", "paid")
    page.screenshot(path=str(artifacts / "dashboard-payouts-started.png"), full_page=True)

    def final() -> str | None:  # reload, as a person would, until the worker is done
        page.reload()
        status = page.locator("#withdrawals tbody tr").first.locator(".status").inner_text()
        return status if status in ("paid", "failed") else None

    assert until(final, "the withdrawal never reached a final status") == "paid"
    assert page.locator("#balance").inner_text() == "5.90"
    page.screenshot(path=str(artifacts / "dashboard-payouts-paid.png"), full_page=True)
    listed = s.get("/sellers/me/withdrawals").json()["data"]
    assert [(w["amount"], w["status"]) for w in listed] == [("4.00", "paid")]


def test_an_owner_reads_key_spend_and_opens_a_pending_approval(
    server: LiveServer, page: Any, artifacts: Path
) -> None:
    acct, resource_id = setup(server, allowance="5.00", period="week", max_per_tx="1.00")
    assert pay(server, acct, resource_id, "paid").status_code == 200
    r = httpx.patch(
        f"{server.url}/wallet-keys/{acct.wallet_key_id}",
        json={"policy": {"approval_above": "0.10"}},
        headers={"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"},
    )
    assert r.status_code == 200, r.text
    asked = pay(server, acct, resource_id, "asked")
    assert asked.status_code == 202, asked.text

    page.goto(link(server, acct.owner_jwt))
    page.get_by_role("link", name="Wallet keys").click()
    meter = page.get_by_label("Budget used this week")
    # the payment made and the one held for approval both count against the allowance
    assert meter.evaluate("m => [m.tagName, m.value, m.max]") == ["METER", 500000, 5000000]
    assert page.get_by_text("used 0.50 of 5.00 USDC").is_visible()
    page.screenshot(path=str(artifacts / "dashboard-keys.png"), full_page=True)

    page.get_by_role("link", name="Approvals").click()
    row = page.locator(f"#approval-{asked.json()['id']}")
    assert "0.25" in row.inner_text()
    page.screenshot(path=str(artifacts / "dashboard-approvals.png"), full_page=True)
    row.get_by_role("link", name="Approve or decline").click()
    assert page.get_by_role("heading", level=1).inner_text() == "Approve a payment"
    assert page.locator("#amount").inner_text() == "0.25 USD"


def test_live_payouts_are_set_up_on_the_processors_onboarding_page(
    live: LiveServer,  # noqa: F811  (the fixture imported above)
    stripe_double: StripeDouble,
    page: Any,
    artifacts: Path,
) -> None:
    seller = live_seller(live, sales=1)
    page.goto(link(live, seller.acct.owner_jwt))
    page.goto(f"{live.url}/dashboard/payouts?environment=live")
    page.get_by_label("Country of the payout account").select_option("US")
    # The 303 answering the form leaves for the processor's origin: the page's CSP
    # form-action must name it, or the browser stops at the redirect.
    page.get_by_role("button", name="Set up payouts").click()
    page.wait_for_url(stripe_double.api_base + "/_double/onboard/**")
    page.screenshot(path=str(artifacts / "dashboard-live-onboarding.png"), full_page=True)
    page.get_by_role("button", name="Complete onboarding").click()
    page.wait_for_url(live.url + "/processor/connect/return**")
    page.goto(f"{live.url}/dashboard/payouts?environment=live")
    page.get_by_role("button", name="Refresh status").click()
    page.wait_for_load_state()
    assert page.locator("#connect-status .status").inner_text() == "enabled"

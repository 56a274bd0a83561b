"""The dashboard in a real browser (headless chromium): sign in through the one-time link,
see the sales chart, refund a payment and retry a failed webhook delivery, by the
buttons' labels.  Screenshots are kept in ``$SVC_TEST_ARTIFACTS`` (default: the test's
temporary folder)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..money.helpers import market
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
        live = make_server(worker_poll_seconds=0.05, webhook_retry_schedule=(600, 600))
        m = market(live)
        hook(live, m.seller_owner_jwt, receiver.url)
        first = m.agent.pay(resource_id=m.resource.id)
        second = m.agent.pay(resource_id=m.resource.id)
        receiver.wait_for(1)

        page.goto(link(live, m.seller_owner_jwt))
        assert page.url == f"{live.url}/dashboard"
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
            f"{live.url}/payments/{first.receipt_id}",
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

"""The sandbox onboarding page completed by a person in a real browser (headless Debian
chromium driven by Playwright) against a real server on loopback: the page is filled in by
its labels and sent by its buttons' names, then the API, the ledger and the signed webhook
deliveries show what followed.  Every page the sandbox serves is also checked for the
accessibility basics, and the form is completed with JavaScript off."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import httpx
import pytest

import svc
from reference_server import app
from reference_server.settings import utcnow
from svc import webhooks

from ..support import LiveServer, assert_ledger_sound
from ..webhooks.receiver import Receiver
from .helpers import FAST_PAYOUTS, Shop, onboard_url, paid_out, shop, wait_for

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

    #: Opens a page every way a person can meet it, calling ``seen(what)`` on each.
    Visit = Callable[[Page, Shop, Callable[[str], None]], None]

#: Without playwright the module skips, saying so (``SVC_FORBID_SKIPS=1`` fails on it).
expect = pytest.importorskip(
    "playwright.sync_api", reason="browser tests need the playwright package"
).expect

LEGAL_NAME = "Legal name of the account holder"
TERMS = "I accept the sandbox terms of service"
#: The bank accounts' labels on the page, by the sandbox's key for them.
BANKS = {"succeeds": "payouts succeed", "fails": "payouts to it fail"}
EVENTS = ["seller.withdrawn", "withdrawal.paid", "withdrawal.failed"]


def sync(s: Shop) -> dict[str, Any]:
    r = s.post("/sellers/me/connect/sync")
    assert r.status_code == 200, r.text
    return dict(r.json())


def subscribe(live: LiveServer, s: Shop, receiver: Receiver) -> str:
    """The seller's owner receives the payout events; returns the signing secret."""
    r = httpx.post(
        live.url + "/webhooks",
        json={"url": receiver.url, "events": EVENTS},
        headers={**s.owner, "Idempotency-Key": "hook"},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["signing_secret"])


def delivered(receiver: Receiver, secret: str, count: int) -> dict[str, Any]:
    """The first ``count`` deliveries, each verified by its signature, by event type."""
    got = receiver.wait_for(count)
    events = [webhooks.verify(secret, g.body, g.headers) for g in got]
    with pytest.raises(webhooks.WebhookVerificationError):  # the signature covers the body
        webhooks.verify(secret, got[0].body.replace(b"withdrawal", b"withdrawaI"), got[0].headers)
    return {e.type: e.data for e in events}


def fill_in(page: Page, *, bank: str | None = "succeeds", terms: bool = True) -> None:
    """What a person does on the form: their name, a bank account, the terms."""
    page.get_by_label(LEGAL_NAME).fill("Ada Lovelace")
    if bank is not None:
        page.get_by_label(BANKS[bank]).check()
    if terms:
        page.get_by_label(TERMS).check()


def complete(page: Page, url: str, *, bank: str = "succeeds") -> None:
    page.goto(url)
    expect(page.get_by_role("heading", level=1)).to_have_text("Set up payouts")
    fill_in(page, bank=bank)
    page.get_by_role("button", name="Complete onboarding").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Onboarding complete")


def test_a_person_completes_onboarding_and_a_withdrawal_is_paid(
    make_server: Callable[..., LiveServer], receiver: Receiver, page: Page
) -> None:
    live = make_server(**FAST_PAYOUTS)
    s = shop(live)
    secret = subscribe(live, s, receiver)
    url = onboard_url(s)
    assert sync(s)["payouts_enabled"] is False  # the link alone completes nothing

    complete(page, url)
    expect(page.get_by_text("Payouts become ready at the seller's next sync")).to_be_visible()

    flags = sync(s)
    assert flags["payouts_enabled"] is True and flags["details_submitted"] is True
    assert flags["requirements_due"] == []
    assert s.balance() == Decimal("9.90")
    r = s.withdraw("5.00")
    assert r.status_code == 201, r.text
    w = r.json()
    assert wait_for(s, w["id"], "paid")["failure_reason"] is None
    assert s.balance() == Decimal("4.90")
    assert paid_out(live) == Decimal("5.00")  # the ledger shows the money out
    assert_ledger_sound(live)

    by_type = delivered(receiver, secret, 2)
    assert set(by_type) == {"seller.withdrawn", "withdrawal.paid"}
    paid = by_type["withdrawal.paid"]
    assert isinstance(paid, svc.WithdrawalPaidData)
    assert paid.withdrawal_id == w["id"] and paid.amount == 5 and paid.status == "paid"
    withdrawn = by_type["seller.withdrawn"]
    assert isinstance(withdrawn, svc.SellerWithdrawnData)
    assert withdrawn.withdrawal_id == w["id"]

    # the login link's dashboard shows the account and its payout
    r = s.post("/sellers/me/connect/login")
    assert r.status_code == 200, r.text
    page.goto(r.json()["login_url"])
    expect(page.get_by_role("heading", level=1)).to_have_text("Payout account")
    expect(page.get_by_role("cell", name="paid", exact=True)).to_be_visible()


def test_a_failing_bank_account_chosen_on_the_page_fails_the_payout(
    make_server: Callable[..., LiveServer], receiver: Receiver, page: Page
) -> None:
    live = make_server(**FAST_PAYOUTS)
    s = shop(live)
    secret = subscribe(live, s, receiver)
    complete(page, onboard_url(s), bank="fails")
    assert sync(s)["payouts_enabled"] is True
    r = s.withdraw()  # all of it
    assert r.status_code == 201 and r.json()["amount"] == "9.90", r.text
    assert s.balance() == Decimal("0.00")
    done = wait_for(s, r.json()["id"], "failed")
    assert "account_closed" in done["failure_reason"]
    assert s.balance() == Decimal("9.90")  # the money is back
    assert paid_out(live) == 0
    assert_ledger_sound(live)
    by_type = delivered(receiver, secret, 2)
    assert set(by_type) == {"seller.withdrawn", "withdrawal.failed"}
    failed = by_type["withdrawal.failed"]
    assert isinstance(failed, svc.WithdrawalFailedData)
    assert failed.withdrawal_id == r.json()["id"] and failed.reason


def test_finish_later_leaves_requirements_due(server: LiveServer, page: Page) -> None:
    s = shop(server)
    page.goto(onboard_url(s))
    fill_in(page, bank=None, terms=False)  # a name only
    page.get_by_role("button", name="Finish later").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Saved with requirements due")
    due_on_page = page.get_by_role("list").get_by_role("listitem")
    expect(due_on_page).to_have_text(
        ["external_account", "tos_acceptance", "individual.verification.document"]
    )

    flags = sync(s)
    assert flags["payouts_enabled"] is False and flags["details_submitted"] is False
    assert flags["requirements_due"] == [
        "external_account",
        "tos_acceptance",
        "individual.verification.document",
    ]
    refused = s.withdraw()
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "payouts_not_enabled"
    assert "GET /sellers/me/balance" in refused.json()["error"]["message"]
    assert s.balance() == Decimal("9.90")

    # a fresh link finishes the job
    complete(page, onboard_url(s))
    assert sync(s)["payouts_enabled"] is True


def expect_unusable(page: Page, answer: Response | None, heading: str) -> None:
    """A clear page: what happened and what to do, never a stack trace."""
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    expect(page.get_by_text("new one")).to_be_visible()
    assert "Traceback" not in page.content()


def test_an_expired_link_says_so_and_a_fresh_one_works(
    make_server: Callable[..., LiveServer], page: Page
) -> None:
    ahead = [timedelta()]
    live = make_server(connect_link_seconds=60, clock=lambda: utcnow() + ahead[0])
    s = shop(live)

    url = onboard_url(s)
    ahead[0] += timedelta(seconds=61)
    answer = page.goto(url)
    expect_unusable(page, answer, "Onboarding link not usable")

    # a form opened in time but sent too late says the same
    url = onboard_url(s)
    page.goto(url)
    fill_in(page)
    ahead[0] += timedelta(seconds=61)
    with page.expect_navigation() as sent:
        page.get_by_role("button", name="Complete onboarding").click()
    expect_unusable(page, sent.value, "Onboarding link not usable")
    assert sync(s)["payouts_enabled"] is False

    url = onboard_url(s)
    complete(page, url)
    assert sync(s)["payouts_enabled"] is True
    answer = page.goto(url)  # used up
    expect_unusable(page, answer, "Onboarding link not usable")


def test_the_form_works_with_javascript_off(server: LiveServer, browser: Browser) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        s = shop(server)
        complete(page, onboard_url(s))
        assert sync(s)["payouts_enabled"] is True
        other = shop(server)
        page.goto(onboard_url(other))
        page.get_by_role("button", name="Finish later").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Saved with requirements due")
        assert "legal_name" in sync(other)["requirements_due"]
    finally:
        context.close()


# --- accessibility basics, over every page the sandbox serves ------------------------------


def sandbox_pages() -> list[str]:
    """The paths of the pages the sandbox serves people (``Endpoint.page``, under
    /sandbox/), from the app's route table."""
    return sorted(
        ep.path
        for ep in app.served()
        if ep.page and ep.method == "GET" and ep.path.startswith("/sandbox/")
    )


def page_posts(path: str) -> bool:
    """Whether the route table lets a form be sent to the page's own path."""
    return any(ep.method == "POST" and ep.path == path for ep in app.served())


def visit_onboarding(page: Page, s: Shop, seen: Callable[[str], None]) -> None:
    page.goto(onboard_url(s))
    seen("the onboarding form")
    page.goto(onboard_url(s) + "x")
    seen("an unusable onboarding link")
    assert page_posts("/sandbox/connect/onboard/{token}")
    # the server's own checks, as a browser that does not check `required` meets them
    page.goto(onboard_url(s))
    page.locator("form").evaluate("form => { form.noValidate = true }")
    page.get_by_role("button", name="Complete onboarding").click()
    expect(page.get_by_role("alert")).to_contain_text("Please correct 3 problems")
    seen("the form with its problems")
    page.locator("input[name=csrf]").evaluate("input => { input.value = 'stale' }")
    fill_in(page)
    page.get_by_role("button", name="Complete onboarding").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Refused")
    seen("a refused form")
    page.goto(onboard_url(s))
    page.get_by_role("button", name="Finish later").click()
    seen("requirements due")
    complete(page, onboard_url(s))
    seen("onboarding complete")


def visit_login(page: Page, s: Shop, seen: Callable[[str], None]) -> None:
    r = s.post("/sellers/me/connect/login")
    if r.status_code != 200:  # only once onboarded
        complete(page, onboard_url(s))
        sync(s)
        r = s.post("/sellers/me/connect/login")
    assert r.status_code == 200, r.text
    page.goto(r.json()["login_url"])
    seen("the payout account's dashboard")
    page.goto(r.json()["login_url"] + "x")
    seen("an unusable login link")


VISITS: dict[str, Visit] = {
    "/sandbox/connect/onboard/{token}": visit_onboarding,
    "/sandbox/connect/login/{token}": visit_login,
}

#: The roles of the controls a person operates, in chromium's accessibility tree.
CONTROLS = {"textbox", "searchbox", "radio", "checkbox", "combobox", "listbox", "spinbutton"}


def problems_of(page: Page) -> list[str]:
    """The accessibility basics the page misses, as chromium itself computes them."""
    problems = []
    if not (page.locator("html").get_attribute("lang") or "").strip():
        problems.append("<html> has no lang")
    if not page.title().strip():
        problems.append("no <title>")
    if (h1 := page.locator("h1").count()) != 1:
        problems.append(f"{h1} h1 elements, not one")
    unlabelled = page.locator("input:not([type=hidden]), select, textarea").evaluate_all(
        "els => els.filter(el => el.labels.length === 0).map(el => el.outerHTML)"
    )
    problems += [f"no <label> for {html}" for html in unlabelled]
    cdp = page.context.new_cdp_session(page)
    try:
        tree = cdp.send("Accessibility.getFullAXTree")
    finally:
        cdp.detach()
    controls = 0
    for node in tree["nodes"]:
        role = node.get("role", {}).get("value")
        name = str(node.get("name", {}).get("value", "")).strip()
        if node.get("ignored") or role not in CONTROLS | {"button"}:
            continue
        controls += role != "button"
        if not name:
            problems.append(f"a {role} without an accessible name")
    inputs = page.locator("input:not([type=hidden]):not([type=submit]), select, textarea").count()
    if controls != inputs:
        problems.append(f"{inputs} inputs but {controls} named controls in the tree")
    return problems


@pytest.mark.parametrize("path", sandbox_pages())
def test_every_sandbox_page_has_the_accessibility_basics(
    server: LiveServer, page: Page, path: str
) -> None:
    """Each page the route table lists, in each state a person meets it in."""
    visit = VISITS.get(path)
    assert visit is not None, f"the sandbox serves {path}: say in VISITS how a person opens it"
    found: dict[str, list[str]] = {}
    seen: list[str] = []

    def check(what: str) -> None:
        seen.append(what)
        if problems := problems_of(page):
            found[what] = problems

    visit(page, shop(server), check)
    assert len(seen) >= 2 and found == {}, found


def test_the_route_table_gives_the_pages() -> None:
    """Every page the sandbox serves is visited above, and the list is not empty."""
    assert set(sandbox_pages()) == set(VISITS)

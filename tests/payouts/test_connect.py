"""Connect: onboarding is completed by a human on the sandbox page, never by an API call;
sync then shows the readiness flags, and the seller's payouts_enabled follows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx

from reference_server.settings import utcnow

from ..support import LiveServer
from .helpers import complete_onboarding, read_form, shop


def test_onboarding_page_then_sync_enables_payouts(server: LiveServer) -> None:
    s = shop(server)
    assert s.get("/sellers/me/connect").json()["status"] == "not_started"
    r = s.post("/sellers/me/connect/onboard", {"country": "us", "type": "express"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["account"]["country"] == "US" and body["account"]["payouts_enabled"] is False
    url = body["onboard_url"]
    assert url.startswith(server.url + "/sandbox/connect/onboard/")

    # the API alone completes nothing: sync, and the flags stay off
    r = s.post("/sellers/me/connect/sync")
    assert r.json()["payouts_enabled"] is False
    assert "external_account" in r.json()["requirements_due"]
    r = s.post("/sellers/me/connect/login")
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"

    page = httpx.get(url)
    assert page.status_code == 200
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    form = read_form(page.text)
    assert [b["text"] for b in form.buttons] == ["Complete onboarding", "Finish later"]
    assert '<label for="legal_name">' in page.text

    done = complete_onboarding(url)
    assert done.status_code == 200 and "Onboarding complete" in done.text
    # not yet: the flags change at the next sync
    assert s.get("/sellers/me/connect").json()["payouts_enabled"] is False
    assert s.get("/sellers/me/balance").json()["payouts_enabled"] is False
    r = s.post("/sellers/me/connect/sync")
    assert r.status_code == 200
    assert r.json()["payouts_enabled"] is True and r.json()["details_submitted"] is True
    assert r.json()["requirements_due"] == [] and r.json()["status"] == "enabled"
    assert s.get("/sellers/me/balance").json()["payouts_enabled"] is True
    assert s.get("/sellers/me").json()["payouts_enabled"] is True

    # the link was one-time
    assert httpx.get(url).status_code == 404
    login = s.post("/sellers/me/connect/login")
    assert login.status_code == 200
    dash = httpx.get(login.json()["login_url"])
    assert dash.status_code == 200 and "Ada Lovelace" in dash.text


def test_finish_later_leaves_requirements_due(server: LiveServer) -> None:
    s = shop(server)
    url = s.post("/sellers/me/connect/onboard", {"country": "DE"}).json()["onboard_url"]
    page = httpx.get(url)
    form = read_form(page.text)
    csrf = next(i["value"] for i in form.inputs if i.get("name") == "csrf")
    r = httpx.post(url, data={"csrf": str(csrf), "legal_name": "Ada", "action": "later"})
    assert r.status_code == 200 and "requirements due" in r.text.lower()
    sync = s.post("/sellers/me/connect/sync").json()
    assert sync["payouts_enabled"] is False and sync["details_submitted"] is False
    assert set(sync["requirements_due"]) == {
        "external_account",
        "tos_acceptance",
        "individual.verification.document",
    }
    refused = s.withdraw()
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "payouts_not_enabled"
    assert "GET /sellers/me/balance" in refused.json()["error"]["message"]
    # a fresh link finishes it
    url = s.post("/sellers/me/connect/onboard", {"country": "DE"}).json()["onboard_url"]
    assert complete_onboarding(url).status_code == 200
    assert s.post("/sellers/me/connect/sync").json()["payouts_enabled"] is True


def test_the_form_refuses_missing_fields_csrf_and_cross_site_posts(server: LiveServer) -> None:
    s = shop(server)
    url = s.post("/sellers/me/connect/onboard", {"country": "US"}).json()["onboard_url"]
    form = read_form(httpx.get(url).text)
    csrf = str(next(i["value"] for i in form.inputs if i.get("name") == "csrf"))
    missing = httpx.post(url, data={"csrf": csrf, "action": "complete"})
    assert missing.status_code == 422 and 'role="alert"' in missing.text
    assert 'aria-invalid="true"' in missing.text
    full = {
        "csrf": csrf,
        "legal_name": "Ada",
        "bank_account": "succeeds",
        "tos": "accepted",
        "action": "complete",
    }
    assert httpx.post(url, data={**full, "csrf": "x" * 64}).status_code == 403
    assert httpx.post(url, data=full, headers={"Origin": "https://evil.example"}).status_code == 403
    assert httpx.post(url, data=full, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert httpx.post(url, json=full).status_code == 400
    assert s.post("/sellers/me/connect/sync").json()["payouts_enabled"] is False
    assert httpx.post(url, data=full, headers={"Origin": server.url}).status_code == 200
    assert httpx.post(url, data=full).status_code == 404  # used
    assert s.post("/sellers/me/connect/sync").json()["payouts_enabled"] is True


def test_links_expire_and_can_be_fetched_again(make_server: Callable[..., LiveServer]) -> None:
    ahead = [timedelta()]
    server = make_server(connect_link_seconds=60, clock=lambda: utcnow() + ahead[0])
    s = shop(server)
    url = s.post("/sellers/me/connect/onboard", {"country": "US"}).json()["onboard_url"]
    ahead[0] = timedelta(seconds=61)
    assert httpx.get(url).status_code == 404
    assert "new one" in httpx.get(url).text
    fresh = s.post("/sellers/me/connect/onboard", {"country": "US"}).json()["onboard_url"]
    assert fresh != url and complete_onboarding(fresh).status_code == 200


def test_country_and_type_cannot_change_and_bodies_are_checked(server: LiveServer) -> None:
    s = shop(server)
    assert s.post("/sellers/me/connect/onboard", {"country": "US"}).status_code == 200
    r = s.post("/sellers/me/connect/onboard", {"country": "FR"})
    assert r.status_code == 409 and r.json()["error"]["details"]["country"] == "US"
    r = s.post("/sellers/me/connect/onboard", {"country": "USA", "type": "custom"})
    assert r.status_code == 422
    fields = {e["field"] for e in r.json()["error"]["details"]["errors"]}
    assert fields == {"country", "type"}
    assert s.post("/sellers/me/connect/sync").status_code == 200

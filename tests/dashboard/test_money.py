"""The dashboard's money pages over HTTP: wallet keys with their period spend, approvals
waiting for a person, and payouts (Connect set-up by redirect, Withdraw once per form,
refusals shown); every one scoped to the session's owner and environment."""

from __future__ import annotations

import re
from decimal import Decimal

import httpx

from ..approvals.helpers import decide
from ..approvals.test_pay_approval import pay, setup
from ..payouts.helpers import complete_onboarding, onboard, shop
from ..support import LiveServer, at_once
from .helpers import csrf_of, signed_in


def _one_time(html: str) -> str:
    found = re.search(r'name="key" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def test_the_keys_page_shows_policy_and_the_period_spend(server: LiveServer) -> None:
    acct, resource_id = setup(server, allowance="5.00", period="day", max_per_tx="1.00")
    assert pay(server, acct, resource_id, "k1").status_code == 200
    owner = {"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"}
    r = httpx.patch(
        f"{server.url}/wallet-keys/{acct.wallet_key_id}",
        json={"policy": {"allowed_hosts": ["api.example.com"], "approval_above": "0.50"}},
        headers=owner,
    )
    assert r.status_code == 200, r.text
    client = signed_in(server, acct.owner_jwt)
    page = client.get("/dashboard/keys")
    assert page.status_code == 200
    html = page.text
    assert f'id="wallet-key-{acct.wallet_key_id}"' in html
    assert re.search(r'<meter id="meter-[^"]+" min="0" max="5000000" value="250000"', html), html
    assert "used 0.25 of 5.00 USDC" in html
    assert "1.00 USDC" in html and "5.00 USDC per day" in html
    assert "api.example.com" in html and "above 0.50 USDC" in html
    assert acct.wallet_key not in html and "key_hash" not in html
    assert 'aria-current="page"' in html and "/dashboard/keys?environment=test" in html
    # the live environment has no keys of this owner; another owner sees none of them
    assert acct.wallet_key_id not in client.get("/dashboard/keys?environment=live").text
    other, _ = setup(server)
    stranger = signed_in(server, other.owner_jwt).get("/dashboard/keys").text
    assert acct.wallet_key_id not in stranger and other.wallet_key_id in stranger


def test_the_approvals_page_lists_pending_ones_with_their_link(server: LiveServer) -> None:
    acct, resource_id = setup(server, approval_above="0.10")
    asked = pay(server, acct, resource_id, "k")
    assert asked.status_code == 202, asked.text
    body = asked.json()
    client = signed_in(server, acct.owner_jwt)
    html = client.get("/dashboard/approvals").text
    row = re.search(rf'<tr id="approval-{body["id"]}">(.*?)</tr>', html, re.S)
    assert row is not None, html
    assert "0.25" in row.group(1) and resource_id in row.group(1)
    assert f'href="{body["approval_url"]}"' in row.group(1)
    assert "UTC" in row.group(1)  # when it expires
    other, _ = setup(server)
    assert body["id"] not in signed_in(server, other.owner_jwt).get("/dashboard/approvals").text
    assert body["id"] not in client.get("/dashboard/approvals?environment=live").text
    # decided, it no longer waits
    assert decide(body["approval_url"], "decline").status_code == 200
    assert body["id"] not in client.get("/dashboard/approvals").text


def test_set_up_payouts_redirects_to_onboarding_then_withdraw_once(server: LiveServer) -> None:
    s = shop(server)  # balance 9.90
    seller = s.acct.seller_id
    client = signed_in(server, s.acct.owner_jwt)
    page = client.get("/dashboard/payouts")
    assert page.status_code == 200 and "not_started" in page.text
    assert ">Set up payouts</button>" in page.text
    csrf = csrf_of(page.text)
    form = {"csrf": csrf, "environment": "test"}
    # withdrawing before payouts are enabled is refused, and says why
    early = client.post(
        f"/dashboard/payouts/{seller}/withdraw", data={**form, "key": "k0", "amount": "1.00"}
    )
    assert early.status_code == 409 and "not enabled" in early.text
    started = client.post(f"/dashboard/payouts/{seller}/onboard", data={**form, "country": "US"})
    assert started.status_code == 303, started.text
    url = started.headers["location"]
    assert url.startswith(server.url + "/")
    assert complete_onboarding(url).status_code == 200
    page = client.get("/dashboard/payouts")
    assert "Continue set-up" in page.text  # enabled only once synced
    synced = client.post(f"/dashboard/payouts/{seller}/sync", data=form)
    assert synced.status_code == 303
    page = client.get(synced.headers["location"])
    assert ">enabled<" in page.text and "Set up payouts" not in page.text
    key = _one_time(page.text)
    assert key != _one_time(client.get("/dashboard/payouts").text)  # a new one each time

    action = f"/dashboard/payouts/{seller}/withdraw"
    withdrawal = {**form, "key": key, "amount": "4.00"}
    cross = client.post(action, data=withdrawal, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    forged = client.post(action, data={**withdrawal, "csrf": "0" * 64})
    assert forged.status_code == 403
    first = client.post(action, data=withdrawal)
    second = client.post(action, data=withdrawal)  # the same form sent twice
    assert first.status_code == second.status_code == 303, (first.text, second.text)
    assert first.headers["location"] == second.headers["location"]
    listed = s.get("/sellers/me/withdrawals").json()["data"]
    assert [w["amount"] for w in listed] == ["4.00"]
    assert s.balance() == Decimal("5.90")
    shown = client.get(first.headers["location"]).text
    assert f'id="withdrawal-{listed[0]["id"]}"' in shown and listed[0]["id"] in shown

    refused = client.post(action, data={**form, "key": "k2", "amount": "1000.00"})
    assert refused.status_code == 409 and "Not withdrawn" in refused.text
    assert "balance" in refused.text.lower()
    bad = client.post(action, data={**form, "key": "k3", "amount": "-1"})
    assert bad.status_code == 422 and "Amount" in bad.text
    assert s.balance() == Decimal("5.90")
    assert (
        client.get(f"/dashboard/payouts?seller={seller}&starting_after=wd_none").status_code == 404
    )


def test_another_owner_reaches_no_payouts_of_this_one(server: LiveServer) -> None:
    s = shop(server)
    other = shop(server, sales=0)
    stranger = signed_in(server, other.acct.owner_jwt)
    own = stranger.get("/dashboard/payouts")
    assert own.status_code == 200 and s.acct.seller_id not in own.text
    theirs = stranger.get("/dashboard/payouts", params={"seller": s.acct.seller_id})
    assert theirs.status_code == 404
    form = {"csrf": csrf_of(own.text), "environment": "test"}
    for action, extra in (
        ("onboard", {"country": "US"}),
        ("sync", {}),
        ("withdraw", {"key": "x", "amount": "1.00"}),
    ):
        r = stranger.post(f"/dashboard/payouts/{s.acct.seller_id}/{action}", data={**form, **extra})
        assert r.status_code == 404, (action, r.text)
    # the owner's own seller, asked for in the other environment, is not found either
    mine = signed_in(server, s.acct.owner_jwt)
    live = {"csrf": csrf_of(mine.get("/dashboard/payouts").text), "environment": "live"}
    r = mine.post(f"/dashboard/payouts/{s.acct.seller_id}/onboard", data={**live, "country": "US"})
    assert r.status_code == 404
    assert (
        mine.get(f"/dashboard/payouts?environment=live&seller={s.acct.seller_id}").status_code
        == 404
    )
    assert s.get("/sellers/me/connect").json()["status"] == "not_started"


def test_a_form_sent_at_once_from_two_tabs_withdraws_once(server: LiveServer) -> None:
    s = shop(server)
    onboard(s)
    client = signed_in(server, s.acct.owner_jwt)
    page = client.get("/dashboard/payouts").text
    cookies = dict(client.cookies)
    form = {"csrf": csrf_of(page), "environment": "test", "key": _one_time(page), "amount": "2.00"}
    action = f"{server.url}/dashboard/payouts/{s.acct.seller_id}/withdraw"

    def send() -> httpx.Response:
        return httpx.post(action, data=form, cookies=cookies, timeout=30)

    answers = at_once(4, send)
    assert {r.status_code for r in answers} == {303}, [r.text for r in answers]
    assert len({r.headers["location"] for r in answers}) == 1
    assert [w["amount"] for w in s.get("/sellers/me/withdrawals").json()["data"]] == ["2.00"]
    assert s.balance() == Decimal("7.90")


def test_withdrawals_are_paged_newest_first(server: LiveServer) -> None:
    s = shop(server)
    onboard(s)
    made = []
    for _ in range(21):
        r = s.withdraw("0.10")
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
    client = signed_in(server, s.acct.owner_jwt)
    first = client.get("/dashboard/payouts").text
    shown = re.findall(r'<tr id="withdrawal-([^"]+)">', first)
    assert shown == made[::-1][:20]
    older = re.search(r'id="next-page" href="([^"]+)"', first)
    assert older is not None
    second = client.get(older.group(1).replace("&amp;", "&")).text
    assert re.findall(r'<tr id="withdrawal-([^"]+)">', second) == made[:1]
    assert 'id="next-page"' not in second

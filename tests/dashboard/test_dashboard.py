"""The dashboard over HTTP: the one-time link (single use, expiring), the session cookie's
flags, CSRF and cross-site refusals, and tenancy (another owner's session sees and
refunds nothing of this owner's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta

import httpx
from sqlalchemy import update

import svc
from reference_server.ids import hash_key
from reference_server.store import tables as t

from ..money.helpers import D, market
from ..support import LiveServer, new_account, run_python
from .helpers import csrf_of, link, signed_in


def test_the_link_signs_in_once_and_sets_a_strict_cookie(server: LiveServer) -> None:
    m = market(server)
    url = link(server, m.seller_owner_jwt)
    with httpx.Client() as browser:
        r = browser.get(url)
        assert r.status_code == 303 and r.headers["location"] == "/dashboard"
        cookie = r.headers["set-cookie"].lower()
        assert cookie.startswith("svc_dashboard=")
        for flag in ("httponly", "samesite=lax", "path=/dashboard", "max-age=43200"):
            assert flag in cookie, cookie
        assert "secure" not in cookie  # plain http on loopback, development
        assert r.headers["cache-control"] == "no-store"
        again = browser.get(url)
        assert again.status_code == 404 and "not usable" in again.text
        # the session stands: the overview answers, no-store
        page = browser.get(f"{server.url}/dashboard")
        assert page.status_code == 200 and m.seller_id in page.text
        assert page.headers["cache-control"] == "no-store"
    # the token is stored hashed only
    token = url.rsplit("/", 1)[1]
    with server.ctx.db.read() as conn:
        hashes = [r.token_hash for r in conn.execute(t.dashboard_links.select())]
    assert hash_key(token) in hashes and token not in hashes


def test_an_expired_link_signs_in_no_one(server: LiveServer) -> None:
    m = market(server)
    url = link(server, m.seller_owner_jwt)
    token = url.rsplit("/", 1)[1]
    with server.ctx.db.write() as conn:
        conn.execute(
            update(t.dashboard_links)
            .where(t.dashboard_links.c.token_hash == hash_key(token))
            .values(expires_at=server.ctx.now() - timedelta(seconds=1))
        )
    r = httpx.get(url)
    assert r.status_code == 404 and "set-cookie" not in r.headers


def test_pages_without_a_session_refuse(server: LiveServer) -> None:
    for path in ("/dashboard", "/dashboard/payments", "/dashboard/webhooks"):
        r = httpx.get(f"{server.url}{path}", cookies={"svc_dashboard": "forged"})
        assert r.status_code == 401, path


def test_refund_from_the_page_with_csrf_and_not_cross_site(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    client = signed_in(server, m.seller_owner_jwt)
    page = client.get("/dashboard/payments")
    assert page.status_code == 200 and paid.receipt_id in page.text
    csrf = csrf_of(page.text)
    action = f"/dashboard/payments/{paid.receipt_id}/refund"
    form = {"csrf": csrf, "environment": "test"}
    cross = client.post(action, data=form, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    forged = client.post(action, data={**form, "csrf": "0" * 64})
    assert forged.status_code == 403
    assert m.seller.sellers.balance().balance == D("0.99")  # nothing refunded yet
    done = client.post(action, data=form)
    assert done.status_code == 303, done.text
    shown = client.get(done.headers["location"])
    assert "refunded" in shown.text and "Refund 1.00 USD" not in shown.text
    twice = client.post(action, data=form)
    assert twice.status_code == 409
    state = httpx.get(
        f"{server.url}/payments/{paid.receipt_id}",
        headers={"Authorization": f"Bearer {m.seller_key}"},
    )
    assert state.json()["state"] == "refunded"
    assert m.seller.sellers.balance().balance == D("0")


def test_another_owner_sees_and_refunds_nothing_of_this_one(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    # the agent's owner is another owner: its session is a stranger to the seller
    stranger = signed_in(server, m.owner_jwt)
    overview = stranger.get("/dashboard")
    assert overview.status_code == 200 and m.seller_id not in overview.text
    own = stranger.get("/dashboard/payments")
    assert paid.receipt_id not in own.text
    theirs = stranger.get("/dashboard/payments", params={"seller": m.seller_id})
    assert theirs.status_code == 404
    csrf = csrf_of(own.text)
    r = stranger.post(
        f"/dashboard/payments/{paid.receipt_id}/refund",
        data={"csrf": csrf, "environment": "test"},
    )
    assert r.status_code == 404
    # the seller's payment in the other environment is not found either
    live = stranger.post(
        f"/dashboard/payments/{paid.receipt_id}/refund",
        data={"csrf": csrf, "environment": "live"},
    )
    assert live.status_code == 404
    assert m.seller.sellers.balance().balance == D("0.99")


def test_sign_out_ends_the_session(server: LiveServer) -> None:
    m = market(server)
    client = signed_in(server, m.seller_owner_jwt)
    csrf = csrf_of(client.get("/dashboard").text)
    r = client.post("/dashboard/sign-out", data={"csrf": csrf})
    assert r.status_code == 200 and "svc_dashboard=" in r.headers["set-cookie"]
    session = client.cookies.get("svc_dashboard")
    after = httpx.get(f"{server.url}/dashboard", cookies={"svc_dashboard": session or "x"})
    assert after.status_code == 401


def test_svc_dashboard_prints_a_link_that_signs_in(server: LiveServer) -> None:
    m = market(server)
    env = {**os.environ, "SVC_BASE_URL": server.url, "SVC_OWNER_JWT": m.seller_owner_jwt}
    done = run_python("-m", "svc.cli", "dashboard", env=env)
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    assert url.startswith(f"{server.url}/dashboard/login/")
    with httpx.Client() as browser:
        assert browser.get(url).status_code == 303
        assert m.seller_id in browser.get(f"{server.url}/dashboard").text


def test_the_cookie_is_secure_behind_an_https_public_url(
    make_server: Callable[..., LiveServer],
) -> None:
    live = make_server(public_url="https://pay.example")
    m = market(live)
    r = httpx.post(
        f"{live.url}/owners/me/dashboard-link",
        headers={"Authorization": f"Bearer {m.seller_owner_jwt}"},
    )
    assert r.json()["url"].startswith("https://pay.example/dashboard/login/")
    token = r.json()["url"].rsplit("/", 1)[1]
    signed = httpx.get(f"{live.url}/dashboard/login/{token}")
    assert signed.status_code == 303
    assert "; secure" in signed.headers["set-cookie"].lower()


def test_an_expired_session_is_signed_out(server: LiveServer) -> None:
    m = market(server)
    client = signed_in(server, m.seller_owner_jwt)
    assert client.get("/dashboard").status_code == 200
    with server.ctx.db.write() as conn:
        conn.execute(
            update(t.dashboard_sessions)
            .where(t.dashboard_sessions.c.owner_id == m.seller_owner_id)
            .values(expires_at=server.ctx.now() - timedelta(seconds=1))
        )
    assert client.get("/dashboard").status_code == 401


def test_the_webhooks_page_lists_the_endpoints_the_api_lists(server: LiveServer) -> None:
    acct = new_account(server.url)
    owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="test")
    kept = owner.webhooks.create("http://localhost:9/kept")
    gone = owner.webhooks.create("http://localhost:9/gone")
    owner.webhooks.delete(gone.id)
    listener = owner.webhooks.listen()
    page = signed_in(server, acct.owner_jwt).get("/dashboard/webhooks")
    assert page.status_code == 200
    assert [e.id for e in owner.webhooks.list().data] == [kept.id]
    assert kept.id in page.text
    assert gone.id not in page.text and listener.id not in page.text

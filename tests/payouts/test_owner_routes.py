"""The owner dashboard: every ``/sellers/{seller_id}/*`` route (found in the route table)
answers the owner of the seller, 404 to any other owner (never their data), and 401/403
to a seller key or no credential.  The twins run the seller routes' own handlers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest

from reference_server.app import endpoints
from reference_server.web.endpoint import Endpoint

from ..support import LiveServer, new_account
from .helpers import FAST_PAYOUTS, complete_onboarding, shop, wait_for

OWNER_ROUTES = [ep for ep in endpoints() if ep.path.startswith("/sellers/{seller_id}")]


def test_the_dashboard_has_every_seller_route() -> None:
    paths = {(ep.method, ep.path) for ep in OWNER_ROUTES}
    for method, path in [
        ("GET", ""),
        ("GET", "/balance"),
        ("PATCH", "/payments"),
        ("GET", "/resources"),
        ("GET", "/connect"),
        ("PATCH", "/connect"),
        ("POST", "/connect/onboard"),
        ("POST", "/connect/sync"),
        ("POST", "/connect/login"),
        ("POST", "/withdraw"),
        ("GET", "/withdrawals"),
        ("GET", "/withdrawals/{withdrawal_id}"),
        ("POST", "/recycle"),
    ]:
        assert (method, "/sellers/{seller_id}" + path) in paths
    assert all(ep.role is not None and ep.role.value == "owner" for ep in OWNER_ROUTES)


def _request(
    url: str, ep: Endpoint, params: dict[str, str], headers: dict[str, str]
) -> httpx.Response:
    body: Any = dict(getattr(ep.body_class, "EXAMPLE", {})) if ep.writes else None
    return httpx.request(
        ep.method,
        url + ep.path.format(**params),
        json=body,
        headers={**headers, "Idempotency-Key": str(uuid.uuid4())},
        timeout=30,
    )


@pytest.mark.parametrize("ep", OWNER_ROUTES, ids=lambda ep: f"{ep.method} {ep.path}")
def test_another_owner_gets_404_and_a_seller_key_401_or_403(
    module_server: LiveServer, ep: Endpoint
) -> None:
    s = shop(module_server)
    stranger = new_account(module_server.url)
    params = {"seller_id": s.acct.seller_id, "withdrawal_id": "wd_" + "0" * 26}
    owner_of_it = {"Authorization": f"Bearer {s.acct.owner_jwt}", "X-Svc-Environment": "test"}
    other = {"Authorization": f"Bearer {stranger.owner_jwt}", "X-Svc-Environment": "test"}
    r = _request(module_server.url, ep, params, other)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "not_found"
    assert s.acct.seller_id not in r.text.replace(f"/sellers/{s.acct.seller_id}", "")
    # the same owner in the other environment does not see a test seller either
    live = {**owner_of_it, "X-Svc-Environment": "live"}
    assert _request(module_server.url, ep, params, live).status_code == 404
    r = _request(module_server.url, ep, params, s.auth)
    assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_credential"
    r = _request(module_server.url, ep, params, {})
    assert r.status_code == 401
    # its owner reaches it (a refusal, if any, is about the seller's state, never 404/403)
    r = _request(module_server.url, ep, params, owner_of_it)
    if ep.path.endswith("{withdrawal_id}"):
        assert r.json()["error"]["message"] == "No such withdrawal."
    else:
        assert r.status_code not in (401, 403, 404), r.text


def test_an_owner_runs_payouts_from_the_dashboard(
    make_server: Callable[..., LiveServer],
) -> None:
    server = make_server(**FAST_PAYOUTS)
    s = shop(server)
    base = f"{server.url}/sellers/{s.acct.seller_id}"
    h = s.owner

    def call(method: str, path: str, body: Any = None) -> httpx.Response:
        key = {"Idempotency-Key": str(uuid.uuid4())}
        return httpx.request(method, base + path, json=body, headers={**h, **key}, timeout=30)

    assert call("GET", "").json()["id"] == s.acct.seller_id
    assert Decimal(call("GET", "/balance").json()["balance"]) == Decimal("9.90")
    assert call("GET", "/resources").json()["data"][0]["id"] == s.resource_id
    assert call("PATCH", "/payments", {}).json()["mpp_enabled"] is True
    r = call("POST", "/connect/onboard", {"country": "US"})
    assert r.status_code == 200
    assert complete_onboarding(r.json()["onboard_url"]).status_code == 200
    assert call("POST", "/connect/sync").json()["payouts_enabled"] is True
    assert call("GET", "/connect").json()["status"] == "enabled"
    assert call("POST", "/connect/login").json()["login_url"]
    w = call("POST", "/withdraw", {"amount": "2.00"})
    assert w.status_code == 201, w.text
    assert call("GET", "/withdrawals").json()["data"][0]["id"] == w.json()["id"]
    assert call("GET", f"/withdrawals/{w.json()['id']}").json()["amount"] == "2.00"
    # the seller sees the same
    assert s.get(f"/sellers/me/withdrawals/{w.json()['id']}").status_code == 200
    assert s.get("/sellers/me").json()["payouts_enabled"] is True
    wait_for(s, w.json()["id"], "paid")

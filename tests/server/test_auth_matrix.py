"""Every authenticated route, every wrong way in: 401/403/404 in the envelope, never 2xx/5xx."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from reference_server.app import endpoints
from reference_server.web.auth import OptionalAuth, Role
from svc.schema import example_of

from ..support import Account, LiveServer, new_account

AUTHED = [ep for ep in endpoints() if ep.role is not None]
REQUIRED = [ep for ep in AUTHED if not isinstance(ep.auth, OptionalAuth)]
#: One client for the matrix's hundreds of calls (a client per call builds an SSL context).
HTTP = httpx.Client(timeout=30)
OBJECT_ROUTES = [
    ep
    for ep in AUTHED
    if any(p in ep.path for p in ("{resource_id}", "{key_id}", "{seller_id}", "{webhook_id}"))
]


def _path(path: str, world: dict[str, Any], whose: str = "my") -> str:
    return (
        path.replace("{resource_id}", world[f"{whose}_resource"])
        .replace("{key_id}", world["theirs" if whose == "their" else "mine"].wallet_key_id)
        .replace("{destination}", "@nobody-here")
        .replace("{seller_id}", world["theirs" if whose == "their" else "mine"].seller_id)
        .replace("{webhook_id}", world[f"{whose}_webhook"])
        .replace("{delivery_id}", "dlv_unknown")
    )


def _auth(role: Role, acct: Account, environment: str = "test") -> dict[str, str]:
    """``acct``'s credential for ``role``, in ``environment``."""
    return {**acct.bearer(role), "X-Svc-Environment": environment}


@pytest.fixture(scope="module")
def server(module_server: LiveServer) -> LiveServer:
    return module_server


@pytest.fixture(scope="module")
def world(server: LiveServer) -> dict[str, Any]:
    """Two owners, each with a test seller, and a resource belonging to the second."""
    mine = new_account(server.url)
    theirs = new_account(server.url)
    world: dict[str, Any] = {"mine": mine, "theirs": theirs}
    with httpx.Client(base_url=server.url) as http:
        for whose, acct in (("my", mine), ("their", theirs)):
            r = http.post(
                "/resources",
                json={"kind": "http", "path": f"/{whose}", "amount": "1"},
                headers=_auth(Role.SELLER, acct),
            )
            r.raise_for_status()
            world[f"{whose}_resource"] = r.json()["id"]
            r = http.post(
                "/webhooks",
                json={"url": "http://localhost:9/hooks"},
                headers={**_auth(Role.OWNER, acct), "Idempotency-Key": whose},
            )
            r.raise_for_status()
            world[f"{whose}_webhook"] = r.json()["id"]
    return world


def _call(
    server: LiveServer,
    method: str,
    path: str,
    headers: dict[str, str],
    body: dict[str, Any] | None = None,
) -> httpx.Response:
    if body is None and method in {"POST", "PATCH"}:
        body = {}
    headers = {**headers, "Idempotency-Key": secrets.token_hex(8)}
    responses = [
        HTTP.request(method, server.url + prefix + path, json=body, headers=headers)
        for prefix in ("", "/api")
    ]
    for r in responses:
        _assert_envelope(r)
    assert responses[0].status_code == responses[1].status_code
    return responses[0]


def _assert_envelope(r: httpx.Response) -> None:
    body = r.json()
    assert body["ok"] is False, body
    assert isinstance(body["error"]["code"], str) and body["error"]["message"]
    assert body["request_id"] == r.headers["x-request-id"]


@pytest.mark.parametrize("ep", REQUIRED, ids=lambda ep: f"{ep.method} {ep.path}")
def test_no_credential_is_401(server: LiveServer, world: dict[str, Any], ep: Any) -> None:
    r = _call(server, ep.method, _path(ep.path, world), {})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthenticated"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer svc_sk_test_unknownkey",
        "Bearer svc_sk_prod_abc",
        "Bearer not.a.jwt",
        "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
        "Bearer svc_vw_test_unknown",
        "Bearer a b",
    ],
)
@pytest.mark.parametrize("ep", AUTHED, ids=lambda ep: f"{ep.method} {ep.path}")
def test_malformed_or_unknown_credential_is_401(
    server: LiveServer, world: dict[str, Any], ep: Any, header: str
) -> None:
    r = _call(server, ep.method, _path(ep.path, world), {"Authorization": header})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_credential"


@pytest.mark.parametrize("ep", AUTHED, ids=lambda ep: f"{ep.method} {ep.path}")
def test_wrong_role_is_403(server: LiveServer, world: dict[str, Any], ep: Any) -> None:
    mine: Account = world["mine"]
    for other_role in Role:
        if other_role in ep.roles:  # a route may take several (``AnyCredential``)
            continue
        r = _call(server, ep.method, _path(ep.path, world), _auth(other_role, mine))
        assert r.status_code == 403, other_role
        assert r.json()["error"]["code"] == "wrong_credential"


@pytest.mark.parametrize(
    "ep",
    [e for e in AUTHED if e.role in (Role.SELLER, Role.WALLET)],
    ids=lambda ep: f"{ep.method} {ep.path}",
)
def test_wrong_environment_is_403(server: LiveServer, world: dict[str, Any], ep: Any) -> None:
    mine: Account = world["mine"]  # a test key sent with X-Svc-Environment: live
    r = _call(server, ep.method, _path(ep.path, world), _auth(ep.role, mine, "live"))
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "environment_mismatch"


@pytest.mark.parametrize("ep", OBJECT_ROUTES, ids=lambda ep: f"{ep.method} {ep.path}")
def test_another_owners_object_is_404(server: LiveServer, world: dict[str, Any], ep: Any) -> None:
    mine: Account = world["mine"]
    headers = _auth(ep.role, mine)
    # A body its shape refuses is a 422 before any object is looked up (it tells nothing
    # of the object); a valid one reaches the lookup.
    body = None if ep.body_class is None else example_of(ep.body_class)
    r = _call(server, ep.method, _path(ep.path, world, "their"), headers, body)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_sellers_are_scoped_to_owner_and_environment(server: LiveServer) -> None:
    a = new_account(server.url)
    b = new_account(server.url)
    with httpx.Client(base_url=server.url) as http:
        listed = http.get("/sellers", headers=_auth(Role.OWNER, a)).json()
        assert [s["id"] for s in listed["data"]] == [a.seller_id]
        live = http.get("/sellers", headers={"Authorization": f"Bearer {a.owner_jwt}"}).json()
        assert live["data"] == []  # no header = live; a's seller lives in test
        theirs = http.get("/resources", headers={"Authorization": f"Bearer {b.seller_key}"})
        assert theirs.json()["data"] == []


def test_invalid_environment_header_is_400(server: LiveServer, account: Account) -> None:
    r = httpx.get(server.url + "/sellers", headers=_auth(Role.OWNER, account, "prod"))
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_environment"


def test_expired_jwt_is_401(make_server: Any) -> None:
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=60)
    acct = new_account(live.url)
    now[0] += timedelta(seconds=61)
    r = httpx.get(live.url + "/sellers", headers={"Authorization": f"Bearer {acct.owner_jwt}"})
    assert r.status_code == 401
    assert "expired" in r.json()["error"]["message"]


def test_jwt_signed_with_another_secret_is_401(server: LiveServer, account: Account) -> None:
    import jwt

    forged = jwt.encode(
        {"sub": account.owner_id, "iss": "svc", "iat": 1, "exp": 2**31},
        "not-the-secret-but-long-enough-for-hs256-0123456789",
        algorithm="HS256",
    )
    r = httpx.get(server.url + "/sellers", headers={"Authorization": f"Bearer {forged}"})
    assert r.status_code == 401

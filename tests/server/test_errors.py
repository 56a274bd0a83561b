"""Every error path answers in the envelope with a request id (body == X-Request-Id)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from reference_server.web.errors import CODES

from ..support import Account, LiveServer


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["ok"] is False
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert body["request_id"].startswith("req_")
    assert body["request_id"] == r.headers["x-request-id"]
    return body


def seller(account: Account) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.seller_key}"}


@pytest.mark.parametrize("prefix", ["", "/api"])
def test_unknown_route_is_404(server: LiveServer, prefix: str) -> None:
    assert_error(httpx.get(f"{server.url}{prefix}/no/such/route"), 404, "not_found")


def test_wrong_method_is_405_with_allow(server: LiveServer) -> None:
    r = httpx.put(server.url + "/resources")
    assert_error(r, 405, "method_not_allowed")
    assert set(r.headers["allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def post_raw(
    server: LiveServer, account: Account, raw: bytes, content_type: str = "application/json"
) -> httpx.Response:
    headers = {**seller(account), "Content-Type": content_type}
    return httpx.post(server.url + "/resources", content=raw, headers=headers)


@pytest.mark.parametrize(
    "raw", [b'{"kind": "http",', b"[1, 2]", b'"text"', b"NaN", b'{"amount": Infinity}']
)
def test_malformed_json_or_json_that_is_not_an_object_is_400(
    server: LiveServer, account: Account, raw: bytes
) -> None:
    assert_error(post_raw(server, account, raw), 400, "invalid_json")


def test_wrong_content_type_is_415(server: LiveServer, account: Account) -> None:
    r = post_raw(server, account, b"kind=http&path=/x", "application/x-www-form-urlencoded")
    assert_error(r, 415, "unsupported_media_type")


def test_oversized_body_is_413_declared_and_streamed(make_server: Any) -> None:
    live = make_server(max_body_bytes=1024)
    big = b'{"name": "' + b"x" * 4096 + b'"}'
    r = httpx.post(live.url + "/owners", content=big, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "payload_too_large")

    def chunks() -> Any:  # no Content-Length: the limit must hold while streaming
        yield big[:1000]
        yield big[1000:]

    r = httpx.post(
        live.url + "/owners", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_error(r, 413, "payload_too_large")


def test_validation_lists_every_bad_field(server: LiveServer, account: Account) -> None:
    r = httpx.post(
        server.url + "/resources",
        json={"kind": "ftp", "amount": "0.1234567", "colour": "red"},
        headers=seller(account),
    )
    body = assert_error(r, 422, "validation_error")
    fields = {e["field"] for e in body["error"]["details"]["errors"]}
    assert fields == {"kind", "amount", "colour"}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"kind": "http", "amount": "1"}, "path"),
        ({"kind": "mcp", "amount": "1"}, "tool"),
        ({"kind": "http", "path": "/x", "tool": "t", "amount": "1"}, "tool"),
        ({"kind": "http", "path": "x", "amount": "1"}, "path"),
        ({"kind": "http", "path": "/x", "amount": 0.05}, "amount"),
        ({"kind": "http", "path": "/x", "amount": "-1"}, "amount"),
        ({"kind": "http", "path": "/x", "amount": "0"}, "amount"),
        ({"kind": "http", "path": "/x", "amount": "1e400"}, "amount"),
        ({"kind": "http", "path": "/x", "amount": True}, "amount"),
        ({"kind": "http", "path": "/x", "amount": "1", "metadata": []}, "metadata"),
        (
            {"kind": "http", "path": "/x", "amount": "1", "metadata": {"sku_kind": "credit_topup"}},
            "metadata.credits",
        ),
        ({"kind": "http", "path": "/x", "amount": "1", "upstream_url": "ftp://x"}, "upstream_url"),
    ],
)
def test_bad_resource_fields(
    server: LiveServer, account: Account, payload: dict[str, Any], field: str
) -> None:
    r = httpx.post(server.url + "/resources", json=payload, headers=seller(account))
    body = assert_error(r, 422, "validation_error")
    assert field in {e["field"] for e in body["error"]["details"]["errors"]}
    listed = httpx.get(server.url + "/resources", headers=seller(account)).json()
    assert listed["data"] == []  # nothing was half-created


@pytest.mark.parametrize(
    "address",
    ["0x123", "not-an-address", "0x" + "g" * 40, "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed"],
)
def test_bad_payout_wallet_address(server: LiveServer, account: Account, address: str) -> None:
    r = httpx.patch(
        server.url + "/sellers/me/payments",
        json={"payout_wallet_address": address},
        headers=seller(account),
    )
    assert_error(r, 422, "validation_error")
    me = httpx.get(server.url + "/sellers/me", headers=seller(account)).json()
    assert me["mpp_enabled"] is False and me["payout_wallet_address"] is None


def test_patch_without_idempotency_key_is_400(server: LiveServer, account: Account) -> None:
    created = httpx.post(
        server.url + "/resources",
        json={"kind": "http", "path": "/x", "amount": "1"},
        headers=seller(account),
    ).json()
    r = httpx.patch(
        f"{server.url}/resources/{created['id']}", json={"amount": "2"}, headers=seller(account)
    )
    assert_error(r, 400, "idempotency_key_required")


def test_signup_disabled_in_production(make_server: Any) -> None:
    live = make_server(env="production")
    r = httpx.post(live.url + "/owners", json={"email": "a@example.com"})
    assert_error(r, 403, "signup_disabled")


def test_duplicate_email_is_409(server: LiveServer) -> None:
    assert httpx.post(server.url + "/owners", json={"email": "dup@example.com"}).status_code == 201
    r = httpx.post(server.url + "/owners", json={"email": "DUP@example.com"})
    assert_error(r, 409, "email_taken")


def test_unexpected_failure_is_500_envelope(server: LiveServer, monkeypatch: Any) -> None:
    from reference_server.routes import sellers

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sellers.sellers, "list_sellers", boom)
    owner = httpx.post(server.url + "/owners", json={"email": "boom@example.com"}).json()
    r = httpx.get(
        server.url + "/sellers", headers={"Authorization": f"Bearer {owner['owner_jwt']}"}
    )
    body = assert_error(r, 500, "internal_error")
    assert "disk on fire" not in r.text  # internals never leak
    assert body["error"]["message"]


def test_ready_is_503_when_database_unreachable() -> None:
    from starlette.testclient import TestClient

    from reference_server import Settings, create_app

    settings = Settings(database_url="postgresql://nobody@127.0.0.1:1/none", auto_migrate=False)
    with TestClient(create_app(settings)) as client:
        body = assert_error(client.get("/ready"), 503, "not_ready")
        assert body["error"]["details"]["checks"]["database"] == "unreachable"
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["request_id"]


def test_ready_and_health_ok(server: LiveServer) -> None:
    for path in ("/health", "/ready", "/api/health", "/api/ready"):
        r = httpx.get(server.url + path)
        assert r.status_code == 200
        assert r.json()["ok"] is True
        assert r.json()["request_id"] == r.headers["x-request-id"]


def test_error_code_table_is_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", doc, flags=re.M))
    assert rows == {code: str(status) for code, (status, _) in CODES.items()}


def test_deeply_nested_json_is_refused_not_fatal(server: LiveServer, account: Account) -> None:
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)  # as py_ecc (via eth-account) leaves it, process-wide
    try:
        # within the 256 KiB body limit, far deeper than the C stack survives at 100 000
        for raw in (b"[" * 200_000, b'{"a":' * 40_000 + b"1" + b"}" * 40_000):
            assert_error(post_raw(server, account, raw), 400, "invalid_json")
    finally:
        sys.setrecursionlimit(limit)
    assert httpx.get(server.url + "/health").status_code == 200  # still alive


@pytest.mark.parametrize(
    "upstream", ["https://10.0.0.1/x", "https://127.0.0.1/x", "https://169.254.169.254/"]
)
def test_internal_upstreams_are_refused_in_production(make_server: Any, upstream: str) -> None:
    from ..support import new_account

    live = make_server(env="production", signup_enabled=True)
    acct = new_account(live.url)
    r = httpx.post(
        live.url + "/resources",
        json={"kind": "http", "path": "/x", "amount": "1", "upstream_url": upstream},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    )
    body = assert_error(r, 422, "validation_error")
    assert body["error"]["details"]["errors"][0]["field"] == "upstream_url"

"""The input boundary, on the inputs that once earned a 500 and on money requests that
could be read two ways (SQLite and PostgreSQL alike).  The generated attack on every route
is tests/server/test_hostile_inputs.py; these pin the exact answers."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient

from reference_server.store import tables as t

from ..money.helpers import D, market
from ..support import Account, LiveServer, unopened_app
from .test_errors import assert_error


def _seller(account: Account) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.seller_key}", "Content-Type": "application/json"}


def _wallet(key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Idempotency-Key": secrets.token_hex(8),
        "Content-Type": "application/json",
    }


def _create(server: LiveServer, account: Account, body: str | dict[str, Any]) -> httpx.Response:
    """POST /resources as ``account``'s seller: ``body`` raw JSON text, or an object."""
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(server.url + "/resources", content=content, headers=_seller(account))


def _nothing_stored(server: LiveServer, account: Account) -> None:
    assert httpx.get(server.url + "/resources", headers=_seller(account)).json()["data"] == []


def _receipts(live: LiveServer) -> int:
    with live.ctx.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(t.receipts)).scalar_one())


# --- the reported 500s -----------------------------------------------------------------------


def test_pay_to_a_handle_with_a_null_amount_is_422(server: LiveServer) -> None:
    m = market(server)
    r = httpx.post(
        server.url + "/pay",
        json={"destination": "@someone", "amount": None},
        headers=_wallet(m.wallet_key),
    )
    body = assert_error(r, 422, "validation_error")
    assert {"field": "amount", "message": "is required"} in body["error"]["details"]["errors"]


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://example.com:99999/", "http://exa mple.com/", "http://"]
)
def test_pay_url_with_a_malformed_url_is_422(server: LiveServer, url: str) -> None:
    m = market(server)
    r = httpx.post(server.url + "/spend/pay-url", json={"url": url}, headers=_wallet(m.wallet_key))
    body = assert_error(r, 422, "validation_error")
    assert body["error"]["details"]["errors"][0]["field"] == "url"


@pytest.mark.parametrize(("kind", "target"), [("http", "path"), ("mcp", "tool")])
def test_a_resource_with_a_null_target_is_422_and_nothing_is_stored(
    server: LiveServer, account: Account, kind: str, target: str
) -> None:
    """Found by schemathesis: ``{"kind": "mcp", "tool": null}`` created a tool-less
    resource, whose answer broke its own schema (``path_or_tool`` null)."""
    r = _create(server, account, {"kind": kind, target: None, "amount": "0.05"})
    body = assert_error(r, 422, "validation_error")
    assert body["error"]["details"]["errors"] == [
        {"field": target, "message": f"is required for kind {kind}"}
    ]
    _nothing_stored(server, account)


@pytest.mark.parametrize("credits", ["1e20", "1e308", "9223372036854775808", "0.0000001", "-1"])
def test_out_of_range_credits_are_refused(
    server: LiveServer, account: Account, credits: str
) -> None:
    raw = (
        '{"kind": "http", "path": "/c", "amount": "0.05",'
        ' "metadata": {"sku_kind": "credit_topup", "credits": ' + credits + "}}"
    )
    r = _create(server, account, raw)
    assert r.status_code in (400, 422), r.text
    assert r.json()["error"]["code"] in ("invalid_json", "validation_error")
    _nothing_stored(server, account)


@pytest.mark.parametrize(
    ("path", "credential"),
    [
        ("/resources/%00", "seller"),
        ("/wallet-keys/%00", "owner"),
        ("/webhooks/%00/deliveries", "owner"),
        ("/resources/a%01b", "seller"),
        ("/resources/%C3%28", "seller"),
    ],
)
def test_control_characters_in_a_path_are_400(
    server: LiveServer, account: Account, path: str, credential: str
) -> None:
    token = account.seller_key if credential == "seller" else account.owner_jwt
    r = httpx.get(server.url + path, headers={"Authorization": f"Bearer {token}"})
    assert_error(r, 400, "invalid_path")


def test_a_nul_in_a_path_of_a_money_route_is_400(server: LiveServer, account: Account) -> None:
    r = httpx.post(
        server.url + "/sellers/%00/recycle",
        headers={"Authorization": f"Bearer {account.owner_jwt}", "Idempotency-Key": "k"},
    )
    assert_error(r, 400, "invalid_path")


@pytest.mark.parametrize("cursor", ["%00", "a%1Fb", "%C2%85"])
def test_control_characters_in_a_query_are_422_naming_the_parameter(
    server: LiveServer, account: Account, cursor: str
) -> None:
    r = httpx.get(
        server.url + "/resources?starting_after=" + cursor,
        headers={"Authorization": f"Bearer {account.seller_key}"},
    )
    body = assert_error(r, 422, "validation_error")
    assert body["error"]["details"]["errors"][0]["field"] == "starting_after"


@pytest.mark.parametrize("field", ["path", "description"])
@pytest.mark.parametrize("text", ["\u0000", "a\u0007b", "\u0085", "\ud800"])
def test_control_characters_in_body_strings_are_422_and_nothing_is_stored(
    server: LiveServer, account: Account, field: str, text: str
) -> None:
    body = {"kind": "http", "path": "/p", "amount": "0.05", field: "/x" + text}
    r = _create(server, account, body)  # ensure_ascii: each control character sent as \\uXXXX
    answer = assert_error(r, 422, "validation_error")
    assert answer["error"]["details"]["errors"][0]["field"] == field
    _nothing_stored(server, account)


def test_multi_line_text_is_still_accepted(server: LiveServer, account: Account) -> None:
    r = _create(
        server,
        account,
        {"kind": "http", "path": "/p", "amount": "0.05", "description": "one\n\ttwo\r\n"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["description"] == "one\n\ttwo\r\n"


@pytest.mark.parametrize("raw", ["1e999999999", "-9223372036854775809", "1" * 5000, "1e309"])
def test_numbers_no_field_can_hold_are_400(server: LiveServer, account: Account, raw: str) -> None:
    content = '{"kind": "http", "path": "/n", "amount": "0.05", "metadata": {"n": ' + raw + "}}"
    assert_error(_create(server, account, content), 400, "invalid_json")


# --- a money request means one thing ---------------------------------------------------------


def test_a_repeated_key_is_refused_and_nothing_is_paid(server: LiveServer) -> None:
    m = market(server, price="1.00")
    other = m.seller.resources.create(kind="http", path="/v1/other", amount="2.00")
    before = _receipts(server)
    raw = f'{{"resource_id": "{m.resource.id}", "resource_id": "{other.id}"}}'
    r = httpx.post(server.url + "/pay", content=raw, headers=_wallet(m.wallet_key))
    body = assert_error(r, 400, "duplicate_json_key")
    assert body["error"]["details"] == {"key": "resource_id"}
    assert m.agent.spend.balance().balance == D("100.00")
    assert _receipts(server) == before


def test_a_repeated_key_in_a_nested_object_is_refused(server: LiveServer, account: Account) -> None:
    raw = '{"kind": "http", "path": "/d", "amount": "0.05", "metadata": {"a": 1, "a": 2}}'
    assert_error(_create(server, account, raw), 400, "duplicate_json_key")


@pytest.mark.parametrize(
    "header", ["Authorization", "X-Svc-Environment", "x-svc-vw-key", "Idempotency-Key"]
)
def test_a_repeated_money_header_is_refused_and_nothing_is_paid(
    server: LiveServer, header: str
) -> None:
    m = market(server, price="1.00")
    values = {
        "Authorization": f"Bearer {m.wallet_key}",
        "X-Svc-Environment": "test",
        "x-svc-vw-key": m.wallet_key,
        "Idempotency-Key": "one",
    }
    headers: list[tuple[str, str]] = [
        ("Authorization", f"Bearer {m.wallet_key}"),
        ("Idempotency-Key", "k-" + secrets.token_hex(4)),
        ("Content-Type", "application/json"),
    ]
    headers = [(k, v) for k, v in headers if k != header] + [
        (header, values[header]),
        (header, values[header]),
    ]
    before = _receipts(server)
    r = httpx.post(
        server.url + "/pay", json={"resource_id": m.resource.id}, headers=httpx.Headers(headers)
    )
    body = assert_error(r, 400, "duplicate_header")
    assert body["error"]["details"] == {"header": header.lower()}
    assert m.agent.spend.balance().balance == D("100.00")
    assert _receipts(server) == before


# --- what no HTTP client library will send: checked in process --------------------------------


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        (b"Idempotency-Key", b"key\x01", "invalid_idempotency_key"),
        (b"Idempotency-Key", b"key\x00", "invalid_idempotency_key"),
        (b"Idempotency-Key", "cl\u00e9".encode(), "invalid_idempotency_key"),
        (b"Authorization", b"Bearer svc_sk_test_\x00", "invalid_header"),
        (b"X-Svc-Environment", b"test\x7f", "invalid_header"),
        (b"User-Agent", b"agent\x00", "invalid_header"),
    ],
)
def test_control_characters_in_headers_are_400(
    tmp_path: Path, name: bytes, value: bytes, code: str
) -> None:
    """In process: Starlette's test client sends header bytes that h11 would refuse to
    put on the wire.  The boundary refuses them before any database is opened."""
    never_opened = tmp_path / "never-opened.db"
    r = TestClient(unopened_app(never_opened)).post("/pay", content=b"{}", headers=[(name, value)])  # type: ignore[arg-type]
    assert_error(r, 400, code)  # type: ignore[arg-type]
    assert not never_opened.exists()

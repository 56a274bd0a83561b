"""``POST /_bench/commit``: off unless ``bench_routes`` is set; then one row per request,
behind wallet-key auth and a required Idempotency-Key like ``POST /pay``."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import func, select

from reference_server import Settings
from reference_server.app import endpoints
from reference_server.store import tables as t

from ..support import LiveServer, new_account

PATH = "/_bench/commit"


def _headers(credential: str | None, key: str | None = None) -> dict[str, str]:
    headers = {}
    if credential is not None:
        headers["Authorization"] = f"Bearer {credential}"
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


def _rows(live: LiveServer) -> int:
    with live.ctx.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(t.bench_rows)).scalar_one())


def test_off_by_default(server: LiveServer) -> None:
    assert Settings().bench_routes is False
    account = new_account(server.url)
    for path in (PATH, "/api" + PATH):
        r = httpx.post(
            server.url + path, json={}, headers=_headers(account.wallet_key, str(uuid.uuid4()))
        )
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == "not_found"
    assert _rows(server) == 0
    assert all(not ep.path.startswith("/_bench") for ep in endpoints())


def test_commits_one_row_when_enabled(make_server: Callable[..., LiveServer]) -> None:
    live = make_server(bench_routes=True)
    account = new_account(live.url)
    key = str(uuid.uuid4())
    with httpx.Client(base_url=live.url) as http:
        r = http.post(PATH, json={}, headers=_headers(account.wallet_key, key))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] is True and body["id"].startswith("bench_")
        assert _rows(live) == 1

        # The same key replays the first answer without writing again.
        again = http.post(PATH, json={}, headers=_headers(account.wallet_key, key))
        assert again.status_code == 200
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json()["id"] == body["id"]
        assert _rows(live) == 1

        r = http.post("/api" + PATH, json={}, headers=_headers(account.wallet_key, "other"))
        assert r.status_code == 200, r.text
        assert _rows(live) == 2

        # Served, but not advertised: discovery lists production routes only.
        for doc in ("/llms.txt", "/agent-openapi.json"):
            listing = http.get(doc)
            assert listing.status_code == 200
            assert "/pay" in listing.text and "_bench" not in listing.text


def test_needs_a_wallet_key_and_an_idempotency_key(
    make_server: Callable[..., LiveServer],
) -> None:
    live = make_server(bench_routes=True)
    account = new_account(live.url)
    with httpx.Client(base_url=live.url) as http:
        r = http.post(PATH, json={}, headers=_headers(None, str(uuid.uuid4())))
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthenticated"

        r = http.post(PATH, json={}, headers=_headers("svc_vw_test_nope", str(uuid.uuid4())))
        assert r.status_code == 401

        r = http.post(PATH, json={}, headers=_headers(account.seller_key, str(uuid.uuid4())))
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "wrong_credential"

        r = http.post(PATH, json={}, headers=_headers(account.wallet_key))
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "idempotency_key_required"
    assert _rows(live) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("1", True), ("true", True), ("on", True), ("0", False)],
)
def test_env_var(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv("SVC_BENCH_ROUTES", raising=False)
    else:
        monkeypatch.setenv("SVC_BENCH_ROUTES", value)
    assert Settings.from_env().bench_routes is expected

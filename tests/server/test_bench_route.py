"""The benchmark's baseline, ``POST /_bench/commit``, lives in ``bench/``, not in the service:
the production app does not serve it and the production schema has no table for it.
Served by ``bench/_baseline_server.py``, it commits one row per request behind wallet-key
auth and a required Idempotency-Key, through the same pipeline as ``POST /pay``."""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from sqlalchemy import func, inspect, select

from reference_server import Settings
from reference_server.store import Database

from ..support import TEST_SETTINGS, LiveApp, LiveServer, new_account, serve_asgi

PATH = "/_bench/commit"
BASELINE_SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "_baseline_server.py"


def _baseline_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_baseline_server", BASELINE_SCRIPT)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {BASELINE_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _headers(credential: str | None, key: str | None = None) -> dict[str, str]:
    headers = {}
    if credential is not None:
        headers["Authorization"] = f"Bearer {credential}"
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


@pytest.fixture
def bench_app(database_url: str) -> Iterator[tuple[LiveApp, ModuleType, Database]]:
    baseline = _baseline_module()
    settings = Settings(**{**TEST_SETTINGS, "database_url": database_url})
    live = serve_asgi(baseline.create_bench_app(settings))
    database = Database(database_url)
    yield live, baseline, database
    live.stop()
    database.dispose()


def _rows(database: Database, baseline: ModuleType) -> int:
    with database.read() as conn:
        query = select(func.count()).select_from(baseline.bench_rows)
        return int(conn.execute(query).scalar_one())


def test_the_service_neither_serves_nor_stores_it(server: LiveServer) -> None:
    account = new_account(server.url)
    for path in (PATH, "/api" + PATH):
        r = httpx.post(
            server.url + path, json={}, headers=_headers(account.wallet_key, str(uuid.uuid4()))
        )
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == "not_found"
    tables = set(inspect(server.ctx.db.engine).get_table_names())
    assert "receipts" in tables  # the migrated schema is there
    assert not any(name.startswith("bench") for name in tables)


def test_commits_one_row_per_key(
    bench_app: tuple[LiveApp, ModuleType, Database],
) -> None:
    live, baseline, database = bench_app
    account = new_account(live.url)
    key = str(uuid.uuid4())
    with httpx.Client(base_url=live.url) as http:
        r = http.post(PATH, json={}, headers=_headers(account.wallet_key, key))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] is True and body["id"].startswith("bench_")
        assert _rows(database, baseline) == 1

        # The same key replays the first answer without writing again.
        again = http.post(PATH, json={}, headers=_headers(account.wallet_key, key))
        assert again.status_code == 200
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json()["id"] == body["id"]
        assert _rows(database, baseline) == 1

        r = http.post("/api" + PATH, json={}, headers=_headers(account.wallet_key, "other"))
        assert r.status_code == 200, r.text
        assert _rows(database, baseline) == 2

        # The rest of the service is there, and discovery does not list the baseline.
        for doc in ("/llms.txt", "/agent-openapi.json"):
            listing = http.get(doc)
            assert listing.status_code == 200
            assert "/pay" in listing.text and "_bench" not in listing.text


def test_needs_a_wallet_key_and_an_idempotency_key(
    bench_app: tuple[LiveApp, ModuleType, Database],
) -> None:
    live, baseline, database = bench_app
    account = new_account(live.url)
    refusals = [
        (None, str(uuid.uuid4()), 401, "unauthenticated"),
        ("svc_vw_test_nope", str(uuid.uuid4()), 401, None),
        (account.seller_key, str(uuid.uuid4()), 403, "wrong_credential"),
        (account.wallet_key, None, 400, "idempotency_key_required"),
    ]
    with httpx.Client(base_url=live.url) as http:
        for credential, key, status, code in refusals:
            r = http.post(PATH, json={}, headers=_headers(credential, key))
            assert r.status_code == status, r.text
            assert code is None or r.json()["error"]["code"] == code
    assert _rows(database, baseline) == 0


def test_the_old_variable_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_BENCH_ROUTES", "1")
    assert not hasattr(Settings.from_env(), "bench_routes")

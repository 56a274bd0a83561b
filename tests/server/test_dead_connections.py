"""A pooled database connection that died (a restarted database, a dropped socket) costs
a request nothing: the pool has no ``pre_ping`` round trip on every checkout, so a dead
connection is found by a ping after it sat idle, or by the request's first statement,
which the pipeline then runs again on a fresh connection."""

from __future__ import annotations

import time
from typing import Any

import httpx
import psycopg

from reference_server.store import Database

from ..support import LiveServer, new_account

RESOURCE = {"kind": "http", "path": "/v1/report", "amount": "0.05"}


def _pooled(db: Database) -> list[Any]:
    """The connection records resting in the pool (SQLAlchemy's QueuePool)."""
    return list(db.engine.pool._pool.queue)  # type: ignore[attr-defined]


def _kill(db: Database) -> int:
    """End every pooled connection from the database's side (PostgreSQL) or under the
    driver's feet (SQLite, which has no server); returns how many."""
    records = _pooled(db)
    if db.is_sqlite:
        for record in records:
            record.dbapi_connection.close()
        return len(records)
    plain = db.url.replace("postgresql+psycopg://", "postgresql://").split("?")[0]
    with psycopg.connect(plain, autocommit=True) as admin:
        for record in records:
            pid = record.dbapi_connection.info.backend_pid
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return len(records)


def _create(server: LiveServer, seller_key: str, key: str) -> httpx.Response:
    return httpx.post(
        server.url + "/resources",
        json=RESOURCE,
        headers={"Authorization": f"Bearer {seller_key}", "Idempotency-Key": key},
    )


def _quiet_server(make_server: Any) -> LiveServer:
    """A server without its in-server worker: nothing else checks connections out of the
    pool while the test kills them (closing an SQLite connection another thread is using
    crashes the driver; that race is the test's, not the pipeline's)."""
    server: LiveServer = make_server(worker_enabled=False)
    return server


def test_a_write_on_a_dead_connection_is_run_again_on_a_fresh_one(make_server: Any) -> None:
    server = _quiet_server(make_server)
    account = new_account(server.url)
    assert _kill(server.ctx.db) > 0
    first = _create(server, account.seller_key, "k1")
    assert first.status_code == 201, first.text
    again = _create(server, account.seller_key, "k1")
    assert again.json()["id"] == first.json()["id"]


def test_a_connection_idle_for_long_is_pinged_and_replaced(make_server: Any) -> None:
    server = _quiet_server(make_server)
    account = new_account(server.url)
    records = _pooled(server.ctx.db)
    for record in records:
        record.info["svc_idle_since"] = time.monotonic() - 3600
    assert _kill(server.ctx.db) == len(records) > 0
    r = httpx.get(
        server.url + "/resources", headers={"Authorization": f"Bearer {account.seller_key}"}
    )
    assert r.status_code == 200, r.text

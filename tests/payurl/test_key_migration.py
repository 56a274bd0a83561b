"""Migration 0016 moves pay-url's keys into the one idempotency store: each attempt's key
becomes a record of its wallet key's credential that the attempt references, its lease
lapsed (a repeat is answered from the attempt), and going back restores the column."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from reference_server.store import Database

from ..conftest import fresh_database
from ..support import migrate_to

_ATTEMPT = (
    "INSERT INTO spend_attempts (id, environment, owner_id, wallet_key_id, idempotency_key,"
    " request_hash, method, url, host, status, request_id, created_at, updated_at) VALUES"
    " (:id, 'test', 'own_1', 'wk_1', :key, 'h1', 'GET', 'https://x.test/', 'x.test',"
    " 'succeeded', 'req_1', '2026-11-27 06:00:00+00:00', '2026-11-27 06:00:00+00:00')"
)


def test_an_attempts_key_becomes_its_record_in_the_store(tmp_path: Path) -> None:
    (tmp_path / "migrated").mkdir()
    with fresh_database(tmp_path / "migrated") as url:
        db = Database(url)
        try:
            migrate_to(db, "0015")
            with db.engine.begin() as conn:
                conn.execute(text(_ATTEMPT), {"id": "att_1", "key": "k1"})
                conn.execute(text(_ATTEMPT), {"id": "att_2", "key": None})
            migrate_to(db, "0016")
            with db.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT a.id, k.scope, k.route, k.key, k.request_hash, k.state,"
                        " k.locked_until = k.created_at AS lapsed FROM spend_attempts a"
                        " LEFT JOIN idempotency_keys k ON k.id = a.idempotency_record_id"
                        " ORDER BY a.id"
                    )
                ).all()
            assert [tuple(row) for row in rows] == [
                ("att_1", "vw:wk_1", "POST /spend/pay-url", "k1", "h1", "in_flight", True),
                ("att_2", None, None, None, None, None, None),
            ]
            migrate_to(db, "0015", down=True)
            with db.engine.connect() as conn:
                keys = conn.execute(
                    text("SELECT id, idempotency_key FROM spend_attempts ORDER BY id")
                ).all()
                left = conn.execute(text("SELECT count(*) FROM idempotency_keys")).scalar()
            assert [tuple(row) for row in keys] == [("att_1", "k1"), ("att_2", None)]
            assert left == 0
            migrate_to(db, "head")
        finally:
            db.dispose()

"""Migration 0017 moves top-ups' keys into the one idempotency store: each top-up's key
becomes a record of its owner's credential that the top-up references, its lease lapsed
(a repeat is answered from the top-up), and going back restores the column."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from reference_server.domain.top_ups import fingerprint
from reference_server.store import Database

from ..conftest import fresh_database
from ..support import migrate_to

_TOP_UP = (
    "INSERT INTO top_ups (id, owner_id, environment, amount_micros, status, rail, network,"
    " idempotency_key, created_at) VALUES (:id, 'own_1', 'test', :amount, 'pending', :rail,"
    " 'stripe', :key, '2026-11-27 06:00:00+00:00')"
)


def test_a_top_ups_key_becomes_its_record_in_the_store(tmp_path: Path) -> None:
    (tmp_path / "migrated").mkdir()
    with fresh_database(tmp_path / "migrated") as url:
        db = Database(url)
        try:
            migrate_to(db, "0016")
            with db.engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO owners (id, email, created_at)"
                        " VALUES ('own_1', 'o@example.com', '2026-11-27 06:00:00+00:00')"
                    )
                )
                for id_, amount, rail, key in [
                    ("tu_1", 300_000, "x402", "k1"),
                    ("tu_2", 5_000_000, "card", "k2"),
                    ("tu_3", 100_000, "x402", None),
                ]:
                    values = {"id": id_, "amount": amount, "rail": rail, "key": key}
                    conn.execute(text(_TOP_UP), values)
            migrate_to(db, "0017")
            with db.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT u.id, k.scope, k.route, k.key, k.request_hash, k.state,"
                        " k.locked_until = k.created_at AS lapsed FROM top_ups u"
                        " LEFT JOIN idempotency_keys k ON k.id = u.idempotency_record_id"
                        " ORDER BY u.id"
                    )
                ).all()
            route, scope = "POST /owners/me/top-ups", "owner:own_1:test"
            assert [tuple(row) for row in rows] == [
                ("tu_1", scope, route, "k1", fingerprint(300_000, card=False), "in_flight", True),
                ("tu_2", scope, route, "k2", fingerprint(5_000_000, card=True), "in_flight", True),
                ("tu_3", None, None, None, None, None, None),
            ]
            migrate_to(db, "0016", down=True)
            with db.engine.connect() as conn:
                keys = conn.execute(
                    text("SELECT id, idempotency_key FROM top_ups ORDER BY id")
                ).all()
                left = conn.execute(text("SELECT count(*) FROM idempotency_keys")).scalar()
            assert [tuple(row) for row in keys] == [("tu_1", "k1"), ("tu_2", "k2"), ("tu_3", None)]
            assert left == 0
            migrate_to(db, "head")
        finally:
            db.dispose()

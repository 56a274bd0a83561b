"""Migration 0014 on a database that has top-ups: they survive it, a pending card top-up
(no transaction, no transfer yet) fits after it, and going back drops only those."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from reference_server.store import Database

from ..conftest import fresh_database
from ..support import migrate_to

_TOP_UP = (
    "INSERT INTO top_ups (id, owner_id, environment, amount_micros, status, rail, network,"
    " tx_hash, payer, transfer_id, created_at) VALUES (:id, 'own_1', 'live', 1000000, :status,"
    " :rail, 'eip155:84532', :tx, NULL, :transfer, '2026-11-27 06:00:00+00:00')"
)


def _ids(db: Database) -> list[str]:
    with db.engine.connect() as conn:
        return list(conn.execute(text("SELECT id FROM top_ups ORDER BY id")).scalars())


def test_top_ups_survive_0014_and_a_pending_card_top_up_fits(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        db = Database(url)
        try:
            migrate_to(db, "0013")
            with db.engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO owners (id, email, created_at)"
                        " VALUES ('own_1', 'o@example.com', '2026-11-27 06:00:00+00:00')"
                    )
                )
                conn.execute(
                    text(_TOP_UP),
                    {
                        "id": "tu_1",
                        "status": "succeeded",
                        "rail": "x402",
                        "tx": "0xab",
                        "transfer": "tr_1",
                    },
                )
            migrate_to(db, "0014")
            with db.engine.begin() as conn:
                conn.execute(
                    text(_TOP_UP),
                    {
                        "id": "tu_2",
                        "status": "pending",
                        "rail": "card",
                        "tx": None,
                        "transfer": None,
                    },
                )
            assert _ids(db) == ["tu_1", "tu_2"]
            migrate_to(db, "0013", down=True)
            assert _ids(db) == ["tu_1"]  # only the pending card top-up could not stay
            migrate_to(db, "head")
        finally:
            db.dispose()

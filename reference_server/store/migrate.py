"""Bring a database to the newest schema with Alembic, safely from several processes."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from .database import Database

__all__ = ["alembic_config", "upgrade"]

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_PG_LOCK_ID = 0x5FC_2024  # any constant; shared by every process migrating this database


def alembic_config(db: Database) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    return cfg


def upgrade(db: Database) -> None:
    """``alembic upgrade head``; on PostgreSQL under an advisory lock so that two server
    processes starting together do not both try to create the tables."""
    cfg = alembic_config(db)
    with db.engine.connect() as conn:
        if not db.is_sqlite:
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _PG_LOCK_ID})
            conn.commit()
        try:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()
        finally:
            if not db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _PG_LOCK_ID})
                conn.commit()

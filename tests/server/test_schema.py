"""The migrations build exactly the schema the code's table definitions describe, on the
test's database (SQLite file, or PostgreSQL with SVC_TEST_DATABASE_URL)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from reference_server.store import tables as t

from ..sandbox.helpers import migrated


def test_migrations_match_every_table_definition(database_url: str) -> None:
    with migrated(database_url) as db, db.engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_name": lambda name, kind, _: name != "alembic_version"}
        )
        assert compare_metadata(context, t.metadata) == []

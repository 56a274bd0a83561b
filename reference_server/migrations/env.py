"""Alembic environment: runs on the connection handed over by ``store.migrate.upgrade``,
or on ``sqlalchemy.url`` when invoked from the alembic command line."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from reference_server.store.tables import metadata

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=metadata,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite:///svc.db")
    with engine.connect() as conn:
        _run(conn)

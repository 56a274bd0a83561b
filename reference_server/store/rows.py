"""Inserting a batch of rows in as few round trips as the database allows."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Connection, Table, insert

__all__ = ["insert_rows"]


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """``rows`` into ``table`` in one statement (nothing for none).

    A lone row is executed as one.  Several are sent with ``RETURNING`` of the primary
    key: SQLAlchemy then writes them as one multi-row ``INSERT ... VALUES`` (its
    "insertmanyvalues"), where without it psycopg's ``executemany`` runs a statement
    per row in a pipeline, which costs more for the few rows a payment writes."""
    if not rows:
        return
    if len(rows) == 1:
        conn.execute(_plain(table), rows[0])
    else:
        conn.execute(_returning(table), rows).all()


@functools.cache
def _plain(table: Table) -> Any:
    return insert(table)


@functools.cache
def _returning(table: Table) -> Any:
    return insert(table).returning(*table.primary_key.columns)

"""Inserting a batch of rows in as few round trips as the database allows."""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Table,
    Text,
    UpdateBase,
    bindparam,
    cast,
    func,
    insert,
    literal_column,
    select,
)

__all__ = ["insert_rows", "write_with_inserts"]


def insert_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """``rows`` into ``table`` in one statement (nothing for none).

    A lone row is executed as one.  On PostgreSQL several are sent with ``RETURNING``
    of the primary key: SQLAlchemy then writes them as one multi-row ``INSERT ...
    VALUES`` (its "insertmanyvalues"), where without it psycopg's ``executemany`` runs
    a statement per row in a pipeline, which costs more for the few rows a payment
    writes.  SQLite's ``executemany`` runs in-process: half the CPU of SQLAlchemy's
    multi-row rendering (25 against 49 µs for a sale's two transfers, measured)."""
    if not rows:
        return
    if len(rows) == 1 or conn.dialect.name != "postgresql":
        conn.execute(_plain(table), rows[0] if len(rows) == 1 else rows)
    else:
        conn.execute(_returning(table), rows).all()


def write_with_inserts(
    conn: Connection,
    statement: UpdateBase,
    params: dict[str, Any],
    batches: Sequence[tuple[Table, list[dict[str, Any]]]],
) -> int:
    """``statement`` (an ``UPDATE``, built once) and the ``batches``' rows (each batch's
    rows with the same columns), written together; answers how many rows ``statement``
    updated.

    On PostgreSQL in one round trip: the ``UPDATE`` and each ``INSERT`` are
    data-modifying ``WITH`` queries of one statement.  A payment writes its balances,
    transfers, receipt and event this way: one statement where it was four, each a round
    trip with its share of the driver's and SQLAlchemy's CPU.  Each table's rows travel
    as one JSON parameter (``json_populate_recordset``): the statement's text and its
    few parameters are the same whatever the number of rows, so SQLAlchemy, psycopg and
    PostgreSQL each prepare it once (with a parameter per value, a multi-row ``VALUES``
    is compiled anew on every call, and past 50 parameters psycopg re-parses the text
    every time: measured, that cost more CPU than the three round trips saved).
    Elsewhere (SQLite, in-process: a statement costs no round trip) one statement
    each."""
    batches = [(table, rows) for table, rows in batches if rows]
    if conn.dialect.name != "postgresql":
        updated = conn.execute(statement, params).rowcount
        for table, rows in batches:
            insert_rows(conn, table, rows)
        return updated
    shape = tuple((table, tuple(rows[0])) for table, rows in batches)
    values = dict(params)
    for b, (_, rows) in enumerate(batches):
        values[f"rows_{b}"] = json.dumps(rows, default=_json_value)
    return int(conn.execute(_together(statement, shape), values).scalar_one())


def _json_value(value: Any) -> Any:
    """What ``json.dumps`` cannot write of a row: its timestamps (ISO 8601, with their
    offset, as ``timestamptz`` reads them)."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"a {type(value).__name__} in a row written as JSON")


@functools.cache
def _together(statement: UpdateBase, shape: tuple[tuple[Table, tuple[str, ...]], ...]) -> Any:
    table = typing.cast(Table, statement.table)
    updated = statement.returning(*table.primary_key.columns).cte("updated")
    inserts = []
    for b, (into, columns) in enumerate(shape):
        rows = func.json_populate_recordset(
            literal_column(f"NULL::{into.name}"), cast(bindparam(f"rows_{b}", type_=Text), JSON)
        ).table_valued(*columns)
        source = select(*(rows.c[c] for c in columns))
        inserts.append(insert(into).from_select(list(columns), source).cte(f"inserted_{b}"))
    return select(func.count()).select_from(updated).add_cte(*inserts)


@functools.cache
def _plain(table: Table) -> Any:
    return insert(table)


@functools.cache
def _returning(table: Table) -> Any:
    return insert(table).returning(*table.primary_key.columns)

"""The suite's PostgreSQL databases: a new schema for every test, and migrated ones reused.

Filling a new schema from the migrated dump costs the server about a quarter of a second
and dropping it another tenth; emptying a used one and renaming it costs under 10 ms.  So
a schema a test got filled is emptied at the test's end and kept for the next test that
asks for a migrated one, unless its shape changed (a test that migrated it itself) or it
cannot be emptied at once (then it is dropped, as before).  Either way the next test
starts on an empty, migrated schema of its own name.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["SchemaPool"]

#: The shape of a schema: its relations, their columns and constraints, and its migration.
_SHAPE = """
SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = %(s)s::regnamespace),
       (SELECT count(*) FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid
         WHERE c.relnamespace = %(s)s::regnamespace AND a.attnum > 0 AND NOT a.attisdropped),
       (SELECT count(*) FROM pg_constraint WHERE connamespace = %(s)s::regnamespace)
"""


class SchemaPool:
    """New schemas for tests, and migrated ones emptied for the next test (one process)."""

    def __init__(self, plain_url: str) -> None:
        self._url = plain_url
        self._free: list[str] = []
        self._filled: set[str] = set()
        self._lock = threading.RLock()
        self._conn: Any = None
        #: The shape of a freshly filled schema, its tables and its sequences.
        self._shape: tuple[Any, ...] | None = None
        self._tables: list[str] = []
        self._sequences: list[str] = []

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        """The pool's one connection (a new one costs more than most of its statements)."""
        import psycopg

        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self._url, autocommit=True)
            yield self._conn

    def is_empty(self, schema: str) -> bool:
        """Whether ``schema`` has no relation yet."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_class WHERE relnamespace = %s::regnamespace", (schema,)
            ).fetchone()
        return bool(row[0] == 0)

    def create(self) -> str:
        """A new, empty schema."""
        schema = "t_" + secrets.token_hex(6)
        with self._connect() as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return schema

    def fill(self, schema: str, dump: str, dumped_schema: str) -> None:
        """Make the empty ``schema`` a migrated one: a kept schema renamed to its name, or
        ``dump`` (of ``dumped_schema``) replayed into it."""
        with self._connect() as conn, conn.transaction():
            kept = self._free.pop() if self._free else None
            if kept is not None:
                conn.execute(f"DROP SCHEMA {schema}")
                conn.execute(f"ALTER SCHEMA {kept} RENAME TO {schema}")
            else:
                conn.execute(dump.replace(dumped_schema + ".", schema + "."))
                if self._shape is None:
                    self._learn(conn, schema)
        self._filled.add(schema)

    def _learn(self, conn: Any, schema: str) -> None:
        """Note a freshly filled schema's shape, tables and sequences."""
        self._shape = self._shape_of(conn, schema)
        self._tables = [t for t in _relations(conn, schema, "r") if t != "alembic_version"]
        self._sequences = _relations(conn, schema, "S")

    @staticmethod
    def _shape_of(conn: Any, schema: str) -> tuple[Any, ...]:
        counts = conn.execute(_SHAPE, {"s": schema}).fetchone()
        from psycopg import sql

        version = conn.execute(
            sql.SQL("SELECT version_num FROM {}.alembic_version").format(sql.Identifier(schema))
        ).fetchall()
        return (*counts, tuple(sorted(row[0] for row in version)))

    def release(self, schema: str) -> None:
        """The test is done with ``schema``: emptied and kept if it can be, else dropped."""
        import psycopg

        filled = schema in self._filled
        self._filled.discard(schema)
        with self._connect() as conn:
            if filled and self._shape is not None:
                try:
                    if self._empty(conn, schema):
                        kept = "t_" + secrets.token_hex(6)
                        conn.execute(f"ALTER SCHEMA {schema} RENAME TO {kept}")
                        self._free.append(kept)
                        return
                except psycopg.Error:
                    pass
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    def _empty(self, conn: Any, schema: str) -> bool:
        """Every row deleted and every sequence restarted, if ``schema`` still has the
        migrated shape and no one holds its tables; whether it was."""
        from psycopg import sql

        with conn.transaction():
            if self._shape_of(conn, schema) != self._shape:
                return False
            # No foreign key is checked while every table is emptied (superuser only).
            conn.execute("SET LOCAL session_replication_role = replica")
            conn.execute("SET LOCAL lock_timeout = '2s'")
            name = sql.Identifier
            conn.execute(
                sql.SQL("; ").join(
                    [
                        sql.SQL("DELETE FROM {}.{}").format(name(schema), name(t))
                        for t in self._tables
                    ]
                    + [
                        sql.SQL("ALTER SEQUENCE {}.{} RESTART").format(name(schema), name(q))
                        for q in self._sequences
                    ]
                )
            )
        return True

    def close(self) -> None:
        """Drop the kept schemas (the end of the session)."""
        with self._connect() as conn:
            for schema in self._free:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            self._free = []
            conn.close()


def _relations(conn: Any, schema: str, kind: str) -> list[str]:
    """The names of ``schema``'s relations of ``kind`` (pg_class.relkind: ``r`` tables,
    ``S`` sequences)."""
    rows = conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace"
        " AND relkind = %s ORDER BY relname",
        (schema, kind),
    )
    return [row[0] for row in rows]

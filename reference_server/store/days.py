"""``utc_day(column)``: a timestamp's UTC calendar day as ``YYYY-MM-DD`` text, in SQL, so a
query can group rows by day where they are instead of sending every row to Python."""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["utc_day"]


class utc_day(FunctionElement[str]):
    """The UTC day of a timestamp column, as text (PostgreSQL's ``timestamptz`` is turned to
    UTC first; SQLite keeps the UTC wall time the store writes)."""

    type = String()
    inherit_cache = True
    name = "utc_day"


@compiles(utc_day, "postgresql")
def _postgresql(element: utc_day, compiler: Any, **kw: Any) -> str:
    (column,) = element.clauses
    return f"to_char(({compiler.process(column, **kw)}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


@compiles(utc_day)
def _sqlite(element: utc_day, compiler: Any, **kw: Any) -> str:
    (column,) = element.clauses
    return f"date({compiler.process(column, **kw)})"

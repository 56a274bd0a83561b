"""Handles: ``@name`` destinations for ledger transfers into an owner's account wallet."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select
from sqlalchemy.exc import IntegrityError

from svc import Handle

from ..ids import new_id
from ..invariant import InvariantError
from ..store import tables as t
from ..timeutil import as_utc
from .errors import DomainError

__all__ = ["HANDLE", "claim_handle", "find_handle", "handle_model", "normalize_handle"]

#: 3 to 30 characters: lowercase letters, digits, ``_`` and ``-``, starting alphanumeric.
HANDLE = re.compile(r"^@?[a-z0-9][a-z0-9_-]{2,29}$")
_h = t.handles


def normalize_handle(value: str) -> str | None:
    value = value.strip().lower()
    if not HANDLE.fullmatch(value):
        return None
    return value.removeprefix("@")


def claim_handle(
    conn: Connection, *, owner_id: str, environment: str, handle: str, now: datetime
) -> Row[Any]:
    try:
        with conn.begin_nested():
            conn.execute(
                insert(_h).values(
                    id=new_id("hdl"),
                    environment=environment,
                    handle=handle,
                    owner_id=owner_id,
                    created_at=now,
                )
            )
    except IntegrityError:
        raise DomainError(
            "handle_taken", f"@{handle} is already taken in {environment}; choose another."
        ) from None
    row = find_handle(conn, handle, environment=environment)
    if row is None:
        raise InvariantError("expected row is not None")
    return row


def find_handle(conn: Connection, handle: str, *, environment: str) -> Row[Any] | None:
    return conn.execute(
        select(_h).where(_h.c.handle == handle, _h.c.environment == environment)
    ).first()


def handle_model(row: Row[Any]) -> Handle:
    return Handle(
        id=row.id,
        handle="@" + row.handle,
        environment=row.environment,
        created_at=as_utc(row.created_at),
    )

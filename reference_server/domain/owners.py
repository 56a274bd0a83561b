"""Owners: the humans (or companies) behind sellers, wallet keys and webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, Table, insert, select
from sqlalchemy.exc import IntegrityError

from ..ids import new_id
from ..store import tables as t
from . import ledger
from .errors import DomainError
from .ledger import ENVIRONMENTS

__all__ = ["ENVIRONMENTS", "create_owner", "find_owned_row", "find_owner_by_email"]


def find_owner_by_email(conn: Connection, email: str) -> str | None:
    return conn.execute(select(t.owners.c.id).where(t.owners.c.email == email)).scalar()


def create_owner(conn: Connection, email: str, now: datetime) -> str:
    """Insert an owner with its account wallet in each environment.  Raises
    :class:`DomainError` ``email_taken`` when the email is an owner's, also one that
    signed up a moment ago in another transaction (PostgreSQL's unique index says so
    then, where SQLite's one writer had already serialised the two)."""
    owner_id = new_id("own")
    try:
        with conn.begin_nested():
            conn.execute(insert(t.owners).values(id=owner_id, email=email, created_at=now))
    except IntegrityError:
        raise DomainError("email_taken", "An owner with this email already exists.") from None
    for env in ENVIRONMENTS:
        ledger.open_account(
            conn, environment=env, kind=ledger.OWNER_WALLET, ref_id=owner_id, now=now
        )
    return owner_id


def find_owned_row(
    conn: Connection,
    table: Table,
    row_id: str,
    *,
    owner_id: str,
    environment: str,
    what: str,
    where: tuple[Any, ...] = (),
) -> Row[Any]:
    """``table``'s row ``row_id`` if the owner has it in ``environment`` (and it meets
    ``where``); ``not_found`` ("No such <what>.") otherwise."""
    c = table.c
    query = select(table).where(
        c.id == row_id, c.owner_id == owner_id, c.environment == environment, *where
    )
    row = conn.execute(query).first()
    if row is None:
        raise DomainError("not_found", f"No such {what}.")
    return row

"""Idempotency keys: the first response to a (credential, route, key) is the answer forever.

Protocol, all in the database so it holds across processes:

1. ``claim`` records the key **in the route's own transaction** (the pipeline's sync
   routes: one transaction per request); a unique constraint makes exactly one concurrent
   caller win, and a second one with the same key waits for the first to commit (or roll
   back) and then gets its answer replayed.  ``begin`` records it as *in flight* in a short
   transaction of its own, for the async routes that hold no transaction across the
   network; a request meeting such a record gets 409 ``idempotency_in_progress`` while it
   runs.  A stored response is replayed (same body, different bytes → 422
   ``idempotency_key_reused``).
2. ``complete`` stores the response **in the same transaction as the route's own
   writes**, so "the money moved" and "the answer was recorded" commit together.
3. A 4xx answer is stored too (Stripe does the same: a retry of a refused request is
   refused the same way), by ``store_refusal`` once the route's transaction rolled back.
   An unexpected failure ``release``\\s an in-flight key so a retry can run.

An in-flight record carries a lease; a process that died mid-request therefore blocks
its key only until ``locked_until``.  Records expire after the configured TTL (24 h),
but for those a pay-url attempt or a top-up references (:func:`purge_expired`,
:func:`lapse`): a key never pays twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, bindparam, delete, exists, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from ..crypto import SecretBox
from ..store import Database
from ..store import tables as t
from ..timeutil import as_utc
from .errors import ApiError

__all__ = [
    "Begun",
    "KeyClaim",
    "KeyTaken",
    "Replay",
    "begin",
    "claim_answered",
    "claim_many",
    "complete",
    "complete_many",
    "lapse",
    "purge_expired",
    "release",
    "request_fingerprint",
    "store_refusal",
]

_MAX_KEY_LENGTH = 255
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]+")
_ti = t.idempotency_keys


def _claim_statement(dialect: Any, *, answered: bool = False) -> Any:
    """Insert a key's record unless it exists: in flight, or (``answered``) already done
    with the answer bound as ``status`` and ``body``."""
    answer: dict[str, Any] = (
        {"response_status": bindparam("status"), "response_body": bindparam("body")}
        if answered
        else {}
    )
    return (
        dialect.insert(_ti)
        .values(
            scope=bindparam("scope"),
            route=bindparam("route"),
            key=bindparam("key"),
            request_hash=bindparam("request_hash"),
            state="done" if answered else "in_flight",
            **answer,
            locked_until=bindparam("locked_until"),
            created_at=bindparam("created_at"),
        )
        .on_conflict_do_nothing()
        .returning(_ti.c.id)
    )


# The statements every idempotent request runs, built once with their parameters bound at
# execution: building a Core statement and its cache key per call costs more than running
# it on SQLite.
_DIALECTS = {"postgresql": postgresql, "sqlite": sqlite}
_CLAIM = {name: _claim_statement(dialect) for name, dialect in _DIALECTS.items()}
#: Several keys at once: the rows inserted come back with their key (SQLAlchemy sends
#: the rows as one multi-row ``INSERT`` when it has ``RETURNING``).
_CLAIM_MANY = {
    name: statement.returning(_ti.c.scope, _ti.c.route, _ti.c.key)
    for name, statement in _CLAIM.items()
}
#: :func:`claim_answered`'s: the key and its answer in one row.
_ANSWERED = {name: _claim_statement(dialect, answered=True) for name, dialect in _DIALECTS.items()}
_COMPLETE = (
    update(_ti)
    .where(_ti.c.id == bindparam("record_id"))
    .values(
        state="done",
        response_status=bindparam("status"),
        response_body=bindparam("body"),
    )
)


@attrs.frozen
class Begun:
    """This request owns the key and must run."""

    record_id: int


@attrs.frozen
class Replay:
    """The key already has an answer: send it again."""

    status: int
    body: dict[str, Any]


@attrs.frozen(kw_only=True)
class KeyClaim:
    """What identifies a request's key and its record: claimed in the route's transaction
    (:func:`claim`), or again for its refusal (:func:`store_refusal`)."""

    scope: str
    route: str
    key: str
    fingerprint: str
    now: datetime
    #: ``None``: kept for good (pay-url's and top-ups', which a row references).
    ttl: timedelta | None
    lease: timedelta


def _for_dialect(statements: dict[str, Any], conn: Connection) -> Any:
    """The statement built for ``conn``'s dialect (SQLite's for any but PostgreSQL)."""
    return statements["postgresql" if conn.dialect.name == "postgresql" else "sqlite"]


def claim(conn: Connection, want: KeyClaim, box: SecretBox) -> Begun | Replay:
    """The key taken in the caller's transaction, or its stored answer to replay.

    One ``INSERT ... ON CONFLICT DO NOTHING`` when the key is new (the usual case); when
    it is taken (a replay, a concurrent twin that committed first, an expired or
    abandoned record) the record is read under lock and answered as :func:`begin` does.
    """
    statement = _for_dialect(_CLAIM, conn)
    record_id = conn.execute(statement, _claim_params(want)).scalar()
    if record_id is not None:
        return Begun(record_id)
    return _begin(
        conn,
        want.scope,
        want.route,
        want.key,
        want.fingerprint,
        want.now,
        want.ttl,
        want.lease,
        box,
    )


def claim_many(conn: Connection, wants: list[KeyClaim], box: SecretBox) -> list[Begun | Replay]:
    """:func:`claim` for several keys (a group commit's), the new ones in one
    ``INSERT ... ON CONFLICT DO NOTHING``; each one taken is then claimed alone, as
    :func:`claim` does (replayed, refused, or taken over).  In ``wants``' order."""
    if len(wants) == 1:
        return [claim(conn, wants[0], box)]
    statement = _for_dialect(_CLAIM_MANY, conn)
    rows = conn.execute(statement, [_claim_params(want) for want in wants]).all()
    inserted = {(row.scope, row.route, row.key): row.id for row in rows}
    answers: list[Begun | Replay] = []
    for want in wants:
        record_id = inserted.pop((want.scope, want.route, want.key), None)
        answers.append(Begun(record_id) if record_id is not None else claim(conn, want, box))
    return answers


class KeyTaken(Exception):
    """:func:`claim_answered` found the key recorded already: the request's transaction
    must roll back, and the request run again claiming its key first (:func:`claim`),
    to be answered from that record."""


def claim_answered(conn: Connection, want: KeyClaim, status: int, body: str) -> None:
    """:func:`claim` and :func:`complete` in one statement, for a request that ran
    before claiming its key (a group commit's lone request, ``endpoint._in_one_transaction``):
    its record is inserted with its answer (``body`` as stored, sealed where it must
    be), in the transaction of what it did, or :class:`KeyTaken` when the key is
    recorded already (a retry, a twin, an expired record).  The usual new key costs one
    statement instead of two; a taken one costs a transaction rolled back."""
    statement = _for_dialect(_ANSWERED, conn)
    params = {**_claim_params(want), "status": status, "body": body}
    if conn.execute(statement, params).scalar() is None:
        raise KeyTaken(f"{want.route}: the key is recorded already")


def _claim_params(want: KeyClaim) -> dict[str, Any]:
    return {
        "scope": want.scope,
        "route": want.route,
        "key": want.key,
        "request_hash": want.fingerprint,
        "locked_until": want.now + want.lease,
        "created_at": want.now,
    }


def store_refusal(
    db: Database, want: KeyClaim, status: int, body: dict[str, Any], box: SecretBox
) -> None:
    """Record a refusal (4xx) under the key once the route's transaction rolled back; a
    twin request that recorded its own answer meanwhile keeps it."""
    try:
        with db.write() as conn:
            begun = claim(conn, want, box)
            if isinstance(begun, Begun):
                complete(conn, begun, status, body)
    except ApiError:
        pass  # the key is another request's now (running, or with another body)


def validate_key(key: str) -> str:
    """The key as stored, or ``invalid_idempotency_key``: 1 to 255 printable ASCII
    characters (a UUID is typical), surrounding spaces ignored."""
    key = key.strip(" \t")
    if not key or len(key) > _MAX_KEY_LENGTH or not _PRINTABLE_ASCII.fullmatch(key):
        raise ApiError(
            "invalid_idempotency_key",
            f"Idempotency-Key must be 1 to {_MAX_KEY_LENGTH} printable ASCII characters "
            "(e.g. a UUID).",
        )
    return key


def request_fingerprint(method: str, path: str, body: Any) -> str:
    """Same method, path and JSON value → same fingerprint, whatever the whitespace."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def begin(
    db: Database,
    *,
    scope: str,
    route: str,
    key: str,
    fingerprint: str,
    now: datetime,
    ttl: timedelta,
    lease: timedelta,
    box: SecretBox,
) -> Begun | Replay:
    for _ in range(3):
        try:
            with db.write() as conn:
                return _begin(conn, scope, route, key, fingerprint, now, ttl, lease, box)
        except IntegrityError:
            # Another process inserted the same key between our read and our insert;
            # read again and answer from its record.
            continue
    raise ApiError("idempotency_in_progress", "A request with this Idempotency-Key is running.")


def _begin(
    conn: Connection,
    scope: str,
    route: str,
    key: str,
    fingerprint: str,
    now: datetime,
    ttl: timedelta | None,
    lease: timedelta,
    box: SecretBox,
) -> Begun | Replay:
    query = select(_ti).where(_ti.c.scope == scope, _ti.c.route == route, _ti.c.key == key)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is not None and ttl is not None and as_utc(row.created_at) + ttl <= now:
        conn.execute(delete(_ti).where(_ti.c.id == row.id))
        row = None
    if row is None:
        record_id = conn.execute(
            insert(_ti)
            .values(
                scope=scope,
                route=route,
                key=key,
                request_hash=fingerprint,
                state="in_flight",
                locked_until=now + lease,
                created_at=now,
            )
            .returning(_ti.c.id)
        ).scalar_one()
        return Begun(record_id)
    if row.request_hash != fingerprint:
        raise ApiError(
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request; "
            "use a new key for a new request.",
        )
    if row.state == "done":
        raw = row.response_body
        if SecretBox.is_sealed(raw):
            raw = box.open(raw)
        return Replay(row.response_status, json.loads(raw))
    if as_utc(row.locked_until) > now:
        raise ApiError(
            "idempotency_in_progress",
            "A request with this Idempotency-Key is still being processed; retry shortly.",
            headers={"Retry-After": "1"},
        )
    # The first attempt's lease ran out (its process died): this request takes over.
    conn.execute(update(_ti).where(_ti.c.id == row.id).values(locked_until=now + lease))
    return Begun(row.id)


def complete(
    conn: Connection,
    begun: Begun,
    status: int,
    body: dict[str, Any],
    *,
    box: SecretBox | None = None,
) -> None:
    """Record the answer; call inside the transaction that made the route's changes.

    With ``box``, the stored body is sealed: it holds a credential shown once.
    """
    raw = json.dumps(body)
    conn.execute(
        _COMPLETE,
        {
            "record_id": begun.record_id,
            "status": status,
            "body": box.seal(raw) if box is not None else raw,
        },
    )


def complete_many(conn: Connection, answers: list[tuple[Begun, int, str]]) -> None:
    """Record several answers (``(begun, status, stored body)``, the body sealed where it
    must be) in one statement: a group commit's (``endpoint._run_group``)."""
    rows = [{"record_id": b.record_id, "status": s, "body": body} for b, s, body in answers]
    if rows:  # one row as a dict: executemany's pipeline costs a lone row more
        conn.execute(_COMPLETE, rows[0] if len(rows) == 1 else rows)


#: The rows that keep their key's record for good, by the column naming it.
_KEEPERS = (t.spend_attempts.c.idempotency_record_id, t.top_ups.c.idempotency_record_id)


def purge_expired(db: Database, *, now: datetime, ttl: timedelta) -> int:
    """Delete records past their TTL (run periodically by the server), but those a
    pay-url attempt or a top-up references: those keep their key for good."""
    kept = [~exists().where(column == _ti.c.id) for column in _KEEPERS]
    with db.write() as conn:
        result = conn.execute(delete(_ti).where(_ti.c.created_at <= now - ttl, *kept))
    return int(result.rowcount or 0)


def lapse(conn: Connection, begun: Begun) -> None:
    """Leave an in-flight record in flight with its lease lapsed: the next request with
    its key takes it over at once (pay-url's while its attempt is the answer; a top-up's,
    which is its answer)."""
    conn.execute(
        update(_ti).where(_ti.c.id == begun.record_id).values(locked_until=_ti.c.created_at)
    )


def release(db: Database, begun: Begun) -> None:
    """Forget an in-flight key after an unexpected failure, so that a retry may run."""
    with db.write() as conn:
        conn.execute(delete(_ti).where(_ti.c.id == begun.record_id, _ti.c.state == "in_flight"))

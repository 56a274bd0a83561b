"""``spend_attempts`` rows: the record of each ``pay-url`` call, and its answer.

An attempt is written before anything is sent or reserved and moves
``probing`` → ``paying`` → ``succeeded`` | ``failed`` (``pending`` in live when the URL
did not confirm a payment it may have settled).  Each step is its own short transaction,
so a crash leaves a row that says how far the attempt got.

The ``Idempotency-Key`` is kept in the one store every route's key is
(``web/idempotency.py``): an attempt references its key's record
(``idempotency_record_id``, one attempt per record).  The answer -- success or error,
unlock body included -- is rendered from the row by :func:`outcome` and stored under the
key when the attempt ends; a repeat that finds the attempt itself (it is still running,
pending, or was left by a process that died) is answered from the row.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import attrs
from sqlalchemy import Connection, Row, Select, Update, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from svc import ErrorDetail, PayUrlResult, SpendAttempt, SpendAttemptList
from svc.money import from_micros

from ...crypto import SecretBox
from ...ids import new_id
from ...invariant import InvariantError
from ...store import tables as t
from ...timeutil import as_utc
from .. import paging
from ..errors import DomainError
from ..paging import PageRequest
from ..principal import Principal

__all__ = [
    "IN_FLIGHT",
    "STALE_AFTER",
    "Order",
    "Replay",
    "Started",
    "begin",
    "fail",
    "get",
    "get_to_conclude",
    "get_to_reserve",
    "list_attempts",
    "named_by",
    "outcome",
    "remove",
    "seller_receipt_id",
    "update_and_get",
    "update_attempt",
]

_sa = t.spend_attempts
IN_FLIGHT = ("probing", "paying")
#: An attempt still in flight after this long belongs to a process that died (the probe
#: and the paid request together are bounded well below it): a retry takes it over.
STALE_AFTER = timedelta(seconds=120)


@attrs.frozen(kw_only=True)
class Order:
    """What the caller asked ``pay-url`` to pay."""

    url: str
    method: str
    #: The JSON body sent to the URL, encoded (``POST`` only).
    content: bytes | None
    #: ``host[:port]`` as the ``Host`` header names it: what ``allowed_hosts`` lists.
    host: str


@attrs.frozen
class Started:
    """This request runs the attempt."""

    attempt_id: str


@attrs.frozen
class Replay:
    """The key already has an attempt: answer from it (``stale`` ones are concluded first)."""

    attempt_id: str
    stale: bool = False


def begin(
    conn: Connection,
    *,
    agent: Principal,
    order: Order,
    record_id: int | None,
    fingerprint: str,
    request_id: str,
    now: datetime,
) -> Started | Replay:
    """A new attempt, or the one the key's record (``record_id``, claimed in this
    transaction) already names: while it still runs, 409 ``idempotency_in_progress``.
    """
    if agent.subject_id is None:
        raise InvariantError("expected agent.subject_id is not None")
    attempt_id = new_id("att")
    values = {
        "id": attempt_id,
        "environment": agent.environment,
        "owner_id": agent.owner_id,
        "wallet_key_id": agent.subject_id,
        "idempotency_record_id": record_id,
        "request_hash": fingerprint,
        "method": order.method,
        "url": order.url,
        "host": order.host,
        "status": "probing",
        "request_id": request_id,
        "created_at": now,
        "updated_at": now,
    }
    # One statement in the usual case (a new key, or none): no savepoint to survive the
    # conflict, which only a key taken over from an attempt can cause.
    inserted = conn.execute(_INSERT[conn.dialect.name == "postgresql"], values).scalar()
    if inserted is not None:
        return Started(attempt_id)
    if record_id is None:
        raise InvariantError(f"attempt id {attempt_id} collided")
    # The record is the caller's own (its scope is the wallet key); the key is named here
    # too, so the query itself never reaches another tenant's attempt.
    query = select(_sa).where(
        _sa.c.idempotency_record_id == record_id, _sa.c.wallet_key_id == agent.subject_id
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).one()
    stale = as_utc(row.updated_at) + STALE_AFTER <= now
    if row.status == "probing" and stale:
        # Its process died before reserving anything: this request takes it over.
        update_attempt(conn, row.id, now, request_id=request_id)
        return Started(row.id)
    if row.status in IN_FLIGHT and not stale:
        raise DomainError(
            "idempotency_in_progress",
            "A pay-url request with this Idempotency-Key is still being processed; retry shortly.",
            details={"attempt_id": row.id},
            retry_after_seconds=1,
        )
    return Replay(row.id, stale=row.status == "paying")


def remove(conn: Connection, attempt_id: str) -> None:
    """Delete an attempt that paid and reserved nothing and that waits for a person's
    approval instead (:mod:`..approvals`): the approved repeat begins its own."""
    conn.execute(_sa.delete().where(_sa.c.id == attempt_id, _sa.c.status == "probing"))


def named_by(conn: Connection, *, scope: str, route: str, key: str) -> str | None:
    """The attempt that references this key's record, if one does."""
    _ti = t.idempotency_keys
    query = (
        select(_sa.c.id)
        .join(_ti, _ti.c.id == _sa.c.idempotency_record_id)
        .where(_ti.c.scope == scope, _ti.c.route == route, _ti.c.key == key)
    )
    found = conn.execute(query).scalar()
    return None if found is None else str(found)


# Every pay-url runs the statements below several times: they are built once, with
# their parameters bound at execution, so that SQLAlchemy neither rebuilds them nor
# recomputes their cache keys per call (a statement built per call costs several times
# what executing it on SQLite does).
_INSERT = {
    pg: dialect.insert(_sa).on_conflict_do_nothing().returning(_sa.c.id)
    for pg, dialect in ((False, sqlite), (True, postgresql))
}
_GET = select(_sa).where(_sa.c.id == bindparam("attempt_id"))
_GET_LOCKED = _GET.with_for_update()


def get(conn: Connection, attempt_id: str, *, lock: bool = False) -> Row[Any]:
    query = _GET_LOCKED if lock and conn.dialect.name == "postgresql" else _GET
    return conn.execute(query, {"attempt_id": attempt_id}).one()


#: What reserving needs of the attempt (its own row, locked): not the rest of its columns.
_TO_RESERVE: Select[Any] = select(
    _sa.c.id, _sa.c.environment, _sa.c.wallet_key_id, _sa.c.host
).where(_sa.c.id == bindparam("attempt_id"))
_TO_RESERVE_LOCKED = _TO_RESERVE.with_for_update()


def get_to_reserve(conn: Connection, attempt_id: str) -> Row[Any]:
    """The attempt locked (PostgreSQL), with the columns reserving reads: ``id``,
    ``environment``, ``wallet_key_id``, ``host``."""
    query = _TO_RESERVE_LOCKED if conn.dialect.name == "postgresql" else _TO_RESERVE
    return conn.execute(query, {"attempt_id": attempt_id}).one()


_lt = t.ledger_transfers
#: The attempt, locked, with what posting its reservation needs of the transfer (none
#: before it reserved): one read where concluding took two.
_TO_CONCLUDE = (
    select(
        _sa,
        _lt.c.debit_account_id.label("transfer_debit_account_id"),
        _lt.c.credit_account_id.label("transfer_credit_account_id"),
        _lt.c.receipt_id.label("transfer_receipt_id"),
    )
    .select_from(_sa.outerjoin(_lt, _lt.c.id == _sa.c.transfer_id))
    .where(_sa.c.id == bindparam("attempt_id"))
)
_w = t.wallet_keys
#: PostgreSQL: the same read, locking the attempt and its wallet key's row in one statement
#: (the lock ``wallets.lock_wallet_key`` takes, in the order reserving takes the two).
_TO_CONCLUDE_LOCKED = _TO_CONCLUDE.join_from(
    _sa, _w, _w.c.id == _sa.c.wallet_key_id
).with_for_update(of=[_sa, _w])


def get_to_conclude(conn: Connection, attempt_id: str) -> Row[Any]:
    """The attempt and its wallet key locked (PostgreSQL; SQLite's writer lock serialises
    already), with its reservation's ``transfer_debit_account_id``,
    ``transfer_credit_account_id`` and ``transfer_receipt_id`` (``None`` before it
    reserved).  The wallet key's is the first lock of every pay-url transaction that
    moves money: the chain and the ledger come after."""
    query = _TO_CONCLUDE_LOCKED if conn.dialect.name == "postgresql" else _TO_CONCLUDE
    return conn.execute(query, {"attempt_id": attempt_id}).one()


@functools.lru_cache(maxsize=64)
def _update(columns: tuple[str, ...], returning: bool = False) -> Update:
    """The update of these columns of one attempt (a handful of sets are ever used); with
    ``returning``, answering the whole row as updated.  The ``RETURNING`` holds the row's
    own columns only: SQLite renders them unqualified there, so a subquery placed beside
    them would compare its own table with itself (it once answered another seller's
    receipt; ``tests/conftest.py`` checks every statement the suite runs)."""
    statement = (
        update(_sa)
        .where(_sa.c.id == bindparam("attempt_id"))
        .values({column: bindparam(f"set_{column}") for column in columns})
    )
    if not returning:
        return statement
    return statement.returning(*_sa.c)


def update_attempt(conn: Connection, attempt_id: str, now: datetime, **values: Any) -> None:
    values["updated_at"] = now
    params = {f"set_{column}": value for column, value in values.items()}
    conn.execute(_update(tuple(sorted(values))), {"attempt_id": attempt_id, **params})


def update_and_get(conn: Connection, attempt_id: str, now: datetime, **values: Any) -> Row[Any]:
    """:func:`update_attempt`, answering the row as it now is (``RETURNING``: the step
    that concludes an attempt needs it for the answer, and no longer reads it again)."""
    values["updated_at"] = now
    params = {f"set_{column}": value for column, value in values.items()}
    statement = _update(tuple(sorted(values)), returning=True)
    return conn.execute(statement, {"attempt_id": attempt_id, **params}).one()


def fail(
    conn: Connection,
    attempt_id: str,
    error: DomainError,
    now: datetime,
    status: str = "failed",
    **values: Any,
) -> Row[Any]:
    """Record how the attempt failed (its answer is this error from now on; ``pending``:
    until the chain says whether it settled); the row."""
    return update_and_get(
        conn,
        attempt_id,
        now,
        status=status,
        error_code=error.code,
        error_message=error.message,
        error_details=error.details,
        **values,
    )


# --- the answer -----------------------------------------------------------------------------


#: A receipt id as a URL may return it in ``X-Svc-Receipt`` (anything else is not one).
_RECEIPT_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")


_r = t.receipts
_SELLER_RECEIPT = select(_r.c.id).where(
    _r.c.environment == bindparam("environment"),
    _r.c.kind == "resource",
    _r.c.tx_hash == bindparam("tx_hash"),
)
_RECEIPT_TX = select(_r.c.tx_hash).where(_r.c.id == bindparam("receipt_id"))


def seller_receipt_id(conn: Connection, row: Row[Any]) -> str | None:
    """The seller's receipt for a succeeded attempt, when it is known: the receipt a gate
    of this service booked for the same transaction (kind ``resource``; the payer's is
    kind ``url``), or else the one the paid URL returned in ``X-Svc-Receipt`` (an
    ``svc_asgi`` gate of a seller's own app does)."""
    if row.status != "succeeded":
        return None
    if row.tx_hash:
        booked = conn.execute(
            _SELLER_RECEIPT, {"environment": row.environment, "tx_hash": row.tx_hash.lower()}
        ).scalar()
        if booked is not None:
            return str(booked)
    returned: str = (row.response_headers or {}).get("x-svc-receipt", "").strip()
    if not _RECEIPT_ID.fullmatch(returned):
        return None
    # A URL may name any id: one of this service's receipts only counts as the seller's
    # when it is for this very transaction (else it is somebody else's receipt).
    known = conn.execute(_RECEIPT_TX, {"receipt_id": returned}).first()
    if known is not None and (
        not row.tx_hash or (known.tx_hash or "").lower() != row.tx_hash.lower()
    ):
        return None
    return returned


def outcome(
    row: Row[Any],
    box: SecretBox,
    *,
    seller_receipt: str | None = None,
    body: str | None = None,
    receipt_token: str | None = None,
) -> PayUrlResult | DomainError:
    """The attempt's answer: the same for the first request and every replay
    (``seller_receipt``: :func:`seller_receipt_id`; ``body``: the row's
    ``response_body`` in plaintext, when the caller sealed it there itself and need not
    open it again)."""
    if row.status == "succeeded":
        if row.response_body is None:
            body = ""
        elif body is None:
            body = box.open(row.response_body)
        return PayUrlResult(
            attempt_id=row.id,
            rail=row.rail,
            status=row.status,
            amount=from_micros(row.amount_micros),
            max_amount=_max_amount(row),
            receipt_id=row.receipt_id,
            payer_receipt_id=row.receipt_id,
            seller_receipt_id=seller_receipt,
            tx_hash=row.tx_hash,
            network=row.network,
            pay_to=row.pay_to,
            unlocked=row.response_status is not None and 200 <= row.response_status < 300,
            upstream_status=row.response_status,
            body=body,
            body_encoding=row.body_encoding or "utf-8",
            body_truncated=row.body_truncated,
            headers=row.response_headers or {},
            note=_note(row),
            receipt_token=receipt_token,
        )
    if row.status in IN_FLIGHT:
        return DomainError(
            "idempotency_in_progress",
            "This pay-url attempt is still being processed; retry shortly.",
            details={"attempt_id": row.id, "status": row.status},
            retry_after_seconds=1,
        )
    details = {**(row.error_details or {}), "attempt_id": row.id, "status": row.status}
    return DomainError(row.error_code, row.error_message, details=details)


def _max_amount(row: Row[Any]) -> Decimal | None:
    return None if row.max_amount_micros is None else from_micros(row.max_amount_micros)


def _note(row: Row[Any]) -> str | None:
    """What a succeeded attempt whose URL answered an error says: it was paid anyway."""
    status = row.response_status
    if row.status != "succeeded" or status is None or status < 400:
        return None
    return (
        f"{row.host} answered {status}, but the payment settled (transaction {row.tx_hash}): "
        f"{from_micros(row.amount_micros)} was charged. The answer is returned as it came; "
        "a refund is the seller's to give."
    )


# --- the list -------------------------------------------------------------------------------


def list_attempts(conn: Connection, request: PageRequest, wallet_key_id: str) -> SpendAttemptList:
    """The key's attempts, newest first (the one paging contract, ``domain.paging``)."""
    page = paging.page(
        conn,
        request,
        select(_sa),
        table=_sa,
        scope=[_sa.c.wallet_key_id == wallet_key_id],
        order="desc",
    )
    return SpendAttemptList(data=[_summary(row) for row in page.rows], has_more=page.has_more)


def _summary(row: Row[Any]) -> SpendAttempt:
    error = None
    if row.error_code is not None:
        error = ErrorDetail(code=row.error_code, message=row.error_message or "")
    return SpendAttempt(
        id=row.id,
        status=row.status,
        url=row.url,
        method=row.method,
        host=row.host,
        rail=row.rail,
        amount=None if row.amount_micros is None else from_micros(row.amount_micros),
        max_amount=_max_amount(row),
        receipt_id=row.receipt_id,
        tx_hash=row.tx_hash,
        upstream_status=row.response_status,
        error=error,
        note=_note(row),
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )

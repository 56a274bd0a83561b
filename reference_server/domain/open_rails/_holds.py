"""Held payments: an open-rail credential verified and claimed, not settled yet.

"Verify, serve, then settle": a gate first verifies a credential and claims its nonce
(:func:`reference_server.domain.open_rails.claim`), then serves the request, then settles
the payment only when the answer succeeded (status below 400), or releases the claim.
Between the two steps the payment is a *hold*, a row of ``rail_claims`` (the replay store
pympp claims nonces in) keyed ``hold:{claim id}``, whose value is the JSON below: what
settling needs (the verified authorization, the charge request, the receipt id reserved
for it) and what releasing needs (the pympp claim key, the resource).  Keeping it there
needs no table of its own and lets any server process settle what another one claimed.

A hold is *taken* by deleting its row: whoever deletes it (settle, release, expiry) owns
it, exactly once, on SQLite and PostgreSQL alike.  A settled hold leaves a
``settled:{claim id}`` row (the receipt id and the paid answer's headers), so that
settling again (a retry after a lost answer) answers the same payment instead of an
error.  A hold never settled nor released (the app crashed, the gate lost its
connection) expires after :data:`HOLD_TTL` and is released by the server's housekeeping
(:func:`expire_holds`): nothing moves, ``payment.failed`` says ``claim_expired``.

A live hold whose settlement's outcome is unknown (the facilitator timed out or failed
after it may have broadcast) is kept as ``unsettled:{claim id}`` (:func:`save_unsettled`)
until the chain decides it (:mod:`._unsettled`): never released by expiry, never purged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, delete, insert, select, update

from ...store import Database
from ...store import tables as t
from ..events import writing
from ._credit import record_refusal
from ._terms import terms_for

__all__ = [
    "HOLD_TTL",
    "Hold",
    "expire_holds",
    "free_claim",
    "load_hold",
    "load_settled",
    "record_settled",
    "release_hold",
    "save_hold",
    "save_unsettled",
    "take_hold",
    "unsettled_holds",
]

_c = t.rail_claims
_PREFIX = "hold:"
_SETTLED = "settled:"
UNSETTLED = "unsettled:"
#: How long a claimed credential waits for its answer before it is released.  Longer than
#: any answer a gate waits for (the hosted gates' upstream timeout is far shorter).
HOLD_TTL = timedelta(minutes=10)


@attrs.frozen(kw_only=True)
class Hold:
    """A verified, claimed credential waiting for its answer."""

    claim: str
    #: pympp's claim of the authorization (its ``rail_claims`` key).
    claim_key: str | None
    receipt_id: str
    resource_id: str
    seller_id: str
    environment: str
    rail: str
    payer: str | None
    #: pympp's verified native authorization and the charge request it pays.
    payload: dict[str, Any]
    request: dict[str, Any]
    request_id: str
    #: The x402 scheme: ``exact`` (pympp's charge, MPP too) or ``upto`` (a metered
    #: resource's Permit2 maximum, :mod:`._upto`; ``payload`` is then the whole x402
    #: payment and ``request`` its requirements, ``amount`` the maximum).
    scheme: str = "exact"
    created_at: datetime | None = None

    def dump(self) -> str:
        fields = attrs.asdict(self)
        fields.pop("created_at")
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def load(cls, value: str, created_at: datetime | None) -> Hold:
        return cls(**json.loads(value), created_at=created_at)


def save_hold(db: Database, hold: Hold, now: datetime) -> None:
    with db.write() as conn:
        conn.execute(insert(_c).values(key=_PREFIX + hold.claim, value=hold.dump(), created_at=now))


def load_hold(db: Database, claim: str) -> Hold | None:
    with db.read() as conn:
        row = conn.execute(select(_c).where(_c.c.key == _PREFIX + claim)).first()
    return None if row is None else Hold.load(row.value, row.created_at)


def record_settled(
    conn: Connection, hold: Hold, tx_hash: str, headers: list[tuple[str, str]], now: datetime
) -> None:
    """Remember, in the settling transaction, what settling ``hold`` answered; pympp's
    claim of the authorization now names the transaction that paid it."""
    if hold.claim_key is not None:
        conn.execute(update(_c).where(_c.c.key == hold.claim_key).values(value=tx_hash))
    value = {
        "receipt_id": hold.receipt_id,
        "rail": hold.rail,
        "seller_id": hold.seller_id,
        "resource_id": hold.resource_id,
        "headers": [list(pair) for pair in headers],
    }
    conn.execute(
        insert(_c).values(
            key=_SETTLED + hold.claim,
            value=json.dumps(value, separators=(",", ":")),
            created_at=now,
        )
    )


def load_settled(db: Database, claim: str) -> dict[str, Any] | None:
    """What settling ``claim`` answered, if it was settled (kept a day)."""
    with db.read() as conn:
        value = conn.execute(select(_c.c.value).where(_c.c.key == _SETTLED + claim)).scalar()
    return None if value is None else dict(json.loads(value))


def hold_of_receipt(conn: Connection, receipt_id: str) -> Hold | None:
    """The live hold (claimed or unsettled) that reserved ``receipt_id``, if any: a
    payment the gate has not settled yet (``GET /payments/{id}`` answers ``claimed``)."""
    needle = '"receipt_id":' + json.dumps(receipt_id) + ","
    rows = conn.execute(
        select(_c).where(
            _c.c.key.startswith(_PREFIX) | _c.c.key.startswith(UNSETTLED),
            _c.c.value.contains(needle, autoescape=True),
        )
    )
    for row in rows:
        hold = Hold.load(row.value, row.created_at)
        if hold.receipt_id == receipt_id:
            return hold
    return None


def take_hold(conn: Connection, claim: str, *, unsettled: bool = False) -> bool:
    """Delete the hold's row (``unsettled``: its unsettled row) inside ``conn``'s
    transaction; true for the one taker."""
    key = (UNSETTLED if unsettled else _PREFIX) + claim
    return bool(conn.execute(delete(_c).where(_c.c.key == key)).rowcount == 1)


def free_claim(conn: Connection, hold: Hold) -> None:
    """Drop the claim of ``hold``'s authorization: it may be presented again."""
    if hold.claim_key is not None:
        conn.execute(delete(_c).where(_c.c.key == hold.claim_key))


def save_unsettled(db: Database, hold: Hold, now: datetime) -> None:
    """Keep a taken hold whose settlement's outcome is unknown, for the chain to decide."""
    with db.write() as conn:
        conn.execute(
            insert(_c).values(key=UNSETTLED + hold.claim, value=hold.dump(), created_at=now)
        )


def unsettled_holds(db: Database) -> list[Hold]:
    """Every hold whose settlement waits for the chain's word, oldest first."""
    with db.read() as conn:
        rows = conn.execute(
            select(_c).where(_c.c.key.startswith(UNSETTLED)).order_by(_c.c.created_at)
        ).all()
    return [Hold.load(row.value, row.created_at) for row in rows]


def release_hold(
    db: Database,
    hold: Hold,
    *,
    settings: Any,
    reason: str,
    message: str,
    status: int | None,
    request_id: str,
    now: datetime,
    notify: Callable[[], None],
    taken: bool = False,
    unsettled: bool = False,
) -> bool:
    """Release ``hold``: its claim goes (the authorization may be presented again; nothing
    moved) and ``payment.failed`` tells the seller's owner why.  ``taken``: the caller
    already deleted the hold's row (a settlement that failed).  False when somebody else
    took it first (settled, released or expired meanwhile).  ``unsettled``: release its
    unsettled row (the chain said it can never settle)."""
    with writing(db, notify) as conn:
        if not taken and not take_hold(conn, hold.claim, unsettled=unsettled):
            return False
        free_claim(conn, hold)
        r, s = t.resources, t.sellers
        resource = conn.execute(select(r).where(r.c.id == hold.resource_id)).first()
        seller = conn.execute(select(s).where(s.c.id == hold.seller_id)).first()
        terms = None if seller is None else terms_for(settings, seller)
        if resource is not None and seller is not None and terms is not None:
            record_refusal(
                conn,
                resource=resource,
                seller=seller,
                terms=terms,
                rail=hold.rail,
                reason=reason,
                message=message,
                payer=hold.payer,
                request_id=request_id or hold.request_id,
                now=now,
                status=status,
            )
    return True


def expire_holds(db: Database, *, settings: Any, now: datetime, notify: Callable[[], None]) -> int:
    """Release every hold older than :data:`HOLD_TTL`; returns how many."""
    with db.read() as conn:
        rows = conn.execute(
            select(_c).where(_c.c.key.startswith(_PREFIX), _c.c.created_at < now - HOLD_TTL)
        ).all()
    released = 0
    for row in rows:
        hold = Hold.load(row.value, row.created_at)
        released += release_hold(
            db,
            hold,
            settings=settings,
            reason="claim_expired",
            message="the credential was claimed but its answer never came back to be "
            "settled or released; released, nothing was charged",
            status=None,
            request_id=hold.request_id,
            now=now,
            notify=notify,
        )
    return released

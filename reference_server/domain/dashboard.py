"""The owner's dashboard: one-time sign-in links, sessions, and what its pages read.

A link (``POST /owners/me/dashboard-link``) is a random token whose SHA-256 alone is
stored; it is good once (:func:`redeem` marks it used in the same ``UPDATE`` that finds
it) and for :data:`LINK_TTL`.  Redeemed, it becomes a session whose token lives in an
HttpOnly cookie and, again, only hashed here.  Every read below is scoped by the
session's owner and the environment in the query itself, so a page never sees another
owner's rows.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, func, select, update

from svc import Seller

from ..context import ServerContext
from ..ids import hash_key
from ..store import Database
from ..store import tables as t
from ..store.days import utc_day
from . import ledger, paging, refund_shares, sellers
from .webhook_endpoints import LISTED

__all__ = [
    "LINK_TTL",
    "SESSION_TTL",
    "available",
    "create_link",
    "csrf_token",
    "deliveries",
    "end_session",
    "owned_delivery",
    "owned_receipt",
    "owned_seller",
    "payments",
    "purge_expired",
    "redeem",
    "refundable",
    "sales_by_day",
    "seller_list",
    "session_owner",
]

LINK_TTL = timedelta(minutes=10)
SESSION_TTL = timedelta(hours=12)
_CSRF = "dashboard_csrf"
_l, _s = t.dashboard_links, t.dashboard_sessions
_r, _sel = t.receipts, t.sellers
_e, _d = t.webhook_endpoints, t.webhook_deliveries


def create_link(conn: Connection, owner_id: str, now: datetime) -> tuple[str, datetime]:
    """A new one-time token for ``owner_id`` and when it expires (the token is not kept)."""
    token = secrets.token_urlsafe(32)
    expires = now + LINK_TTL
    conn.execute(
        _l.insert().values(
            token_hash=hash_key(token), owner_id=owner_id, expires_at=expires, created_at=now
        )
    )
    return token, expires


def redeem(conn: Connection, token: str, now: datetime) -> str | None:
    """The link's token exchanged for a new session's token; ``None`` when the link is
    unknown, expired or already used (one conditional ``UPDATE``: two visits race, one wins)."""
    owner_id = conn.execute(
        update(_l)
        .where(_l.c.token_hash == hash_key(token), _l.c.used_at.is_(None), _l.c.expires_at > now)
        .values(used_at=now)
        .returning(_l.c.owner_id)
    ).scalar()
    if owner_id is None:
        return None
    session = secrets.token_urlsafe(32)
    conn.execute(
        _s.insert().values(
            token_hash=hash_key(session),
            owner_id=owner_id,
            expires_at=now + SESSION_TTL,
            created_at=now,
        )
    )
    return session


def session_owner(conn: Connection, session: str, now: datetime) -> str | None:
    """The owner signed in with ``session``, while it has not expired."""
    return conn.execute(
        select(_s.c.owner_id).where(_s.c.token_hash == hash_key(session), _s.c.expires_at > now)
    ).scalar()


def end_session(conn: Connection, session: str) -> None:
    conn.execute(delete(_s).where(_s.c.token_hash == hash_key(session)))


def purge_expired(db: Database, *, now: datetime) -> int:
    """Delete sign-in links and sessions past their expiry (housekeeping); how many."""
    with db.write() as conn:
        links = conn.execute(delete(_l).where(_l.c.expires_at <= now)).rowcount
        sessions = conn.execute(delete(_s).where(_s.c.expires_at <= now)).rowcount
    return int(links) + int(sessions)


def csrf_token(ctx: ServerContext, session: str) -> str:
    """The forms' CSRF token: bound to the session by a server secret."""
    key = ctx.secret(_CSRF).encode()
    return hmac.new(key, session.encode(), hashlib.sha256).hexdigest()


# --- what the pages read (always by owner and environment) ----------------------------------


def seller_list(conn: Connection, owner_id: str, environment: str) -> list[Seller]:
    rows = conn.execute(
        select(_sel)
        .where(_sel.c.owner_id == owner_id, _sel.c.environment == environment)
        .order_by(_sel.c.created_at, _sel.c.id)
    ).all()
    return [sellers.seller_model(conn, r) for r in rows]


def owned_seller(
    conn: Connection, owner_id: str, environment: str, seller_id: str
) -> Row[Any] | None:
    """The seller's row when it is the owner's in ``environment``; ``None`` otherwise."""
    return conn.execute(
        select(_sel).where(
            _sel.c.id == seller_id,
            _sel.c.owner_id == owner_id,
            _sel.c.environment == environment,
        )
    ).first()


def sales_by_day(
    conn: Connection, owner_id: str, environment: str, now: datetime, days: int = 30
) -> dict[str, dict[str, int]]:
    """Settled sales of the owner's sellers over the last ``days`` days: micros per rail,
    per UTC day (``YYYY-MM-DD``), every day present (zero when nothing sold).  Summed by
    the database, a row per day and rail, so a seller with many sales costs no more here
    than its index range does."""
    start = (now - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    mine = select(_sel.c.id).where(_sel.c.owner_id == owner_id, _sel.c.environment == environment)
    day = utc_day(_r.c.created_at)
    rows = conn.execute(
        select(day, _r.c.rail, func.sum(_r.c.amount_micros))
        .where(
            _r.c.seller_id.in_(mine),
            _r.c.environment == environment,
            _r.c.kind == "resource",
            _r.c.status == "settled",
            _r.c.created_at >= start,
        )
        .group_by(day, _r.c.rail)
    )
    by_day: dict[str, dict[str, int]] = {
        (start + timedelta(days=i)).strftime("%Y-%m-%d"): {} for i in range(days)
    }
    for when, rail, amount in rows:
        if when in by_day:
            by_day[when][rail] = int(amount)
    return by_day


def payments(
    conn: Connection, environment: str, seller_id: str, request: paging.PageRequest
) -> paging.Page:
    """A seller's payments, newest first (keyset on ``(seller_id, created_at)``); the
    caller has checked the seller is the owner's (:func:`owned_seller`)."""
    return paging.page(
        conn,
        request,
        select(_r),
        table=_r,
        scope=[_r.c.seller_id == seller_id, _r.c.environment == environment],
        order="desc",
    )


def available(conn: Connection, environment: str, seller_id: str) -> int:
    """The seller's available balance in micros (what a refund's seller share draws on)."""
    account = ledger.account_id(
        conn, environment=environment, kind=ledger.SELLER_BALANCE, ref_id=seller_id
    )
    return 0 if account is None else ledger.available_micros(conn, account)


def refundable(row: Row[Any], available: int) -> bool:
    """Whether the page offers a Refund button: a settled payment with something left to
    give back, on a rail the service refunds, whose seller share the ``available``
    balance covers (the domain decides again, under its locks, when it is pressed)."""
    return (
        row.status == "settled"
        and row.settlement != "direct_wallet"
        and int(row.refunded_micros) < int(row.amount_micros)
        and refund_shares.seller_share_left(row) <= available
    )


def owned_receipt(
    conn: Connection, owner_id: str, environment: str, receipt_id: str
) -> Row[Any] | None:
    """The receipt when one of the owner's sellers in ``environment`` was paid by it."""
    return conn.execute(
        select(_r)
        .join(_sel, _sel.c.id == _r.c.seller_id)
        .where(
            _r.c.id == receipt_id,
            _r.c.environment == environment,
            _sel.c.owner_id == owner_id,
            _sel.c.environment == environment,
        )
    ).first()


def deliveries(
    conn: Connection, owner_id: str, environment: str, per_endpoint: int = 10
) -> list[tuple[Row[Any], list[Row[Any]]]]:
    """The owner's endpoints (as ``GET /webhooks`` lists them), each with its latest
    deliveries (and their event type)."""
    endpoints = conn.execute(
        select(_e)
        .where(_e.c.owner_id == owner_id, _e.c.environment == environment, *LISTED)
        .order_by(_e.c.created_at, _e.c.id)
    ).all()
    ev = t.events
    out = []
    for endpoint in endpoints:
        rows = conn.execute(
            select(_d, ev.c.type)
            .join(ev, ev.c.id == _d.c.event_id)
            .where(_d.c.endpoint_id == endpoint.id)
            .order_by(_d.c.created_at.desc(), _d.c.id.desc())
            .limit(per_endpoint)
        ).all()
        out.append((endpoint, list(rows)))
    return out


def owned_delivery(conn: Connection, owner_id: str, environment: str, delivery_id: str) -> bool:
    return (
        conn.execute(
            select(_d.c.id)
            .join(_e, _e.c.id == _d.c.endpoint_id)
            .where(
                _d.c.id == delivery_id,
                _e.c.owner_id == owner_id,
                _e.c.environment == environment,
            )
        ).first()
        is not None
    )

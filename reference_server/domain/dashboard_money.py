"""What the dashboard's money pages read (docs/dashboard.md): the owner's wallet keys and
their period spend, each seller's payout account and withdrawals, and the approvals
waiting for a person.

Like :mod:`.dashboard`, every query names the session's owner and the environment in
the query itself, so an id of another owner (or of the other environment) finds nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection, Row, select

from ..store import tables as t
from ..timeutil import as_utc
from . import paging, wallets

__all__ = [
    "KeySpend",
    "key_spend",
    "pending_approvals",
    "wallet_keys",
    "withdrawals",
]

_k, _a, _sel, _w = t.wallet_keys, t.approvals, t.sellers, t.withdrawals
#: What a key's page shows of its row: its policy and counters, never its secret's hash.
_KEY_COLUMNS = [c for c in _k.c if c.name != "key_hash"]


def wallet_keys(conn: Connection, owner_id: str, environment: str) -> list[Row[Any]]:
    """The owner's wallet keys in ``environment``, oldest first (without ``key_hash``)."""
    return list(
        conn.execute(
            select(*_KEY_COLUMNS)
            .where(_k.c.owner_id == owner_id, _k.c.environment == environment)
            .order_by(_k.c.created_at, _k.c.id)
        )
    )


@attrs.frozen
class KeySpend:
    """A key's spend in its current period against its allowance (``None``: no
    allowance, nothing to measure against), and when the period ends."""

    spent: int
    allowance: int | None
    next_reset: datetime | None


def key_spend(row: Row[Any], now: datetime) -> KeySpend:
    """What the key spent in the period ``now`` is in: a reset that is due but not yet
    written (periods roll on the key's next use) counts as zero spent, as the API shows."""
    current, nxt = wallets.period_bounds(row.period, as_utc(row.created_at), now)
    spent = 0 if current > as_utc(row.period_started_at) else int(row.spent_period_micros)
    allowance = None if row.allowance_micros is None else int(row.allowance_micros)
    return KeySpend(spent=spent, allowance=allowance, next_reset=nxt)


def withdrawals(
    conn: Connection, environment: str, seller_id: str, request: paging.PageRequest
) -> paging.Page:
    """A seller's withdrawals, newest first (keyset on ``(created_at, id)``); the caller
    has checked the seller is the owner's (:func:`.dashboard.owned_seller`)."""
    return paging.page(
        conn,
        request,
        select(_w),
        table=_w,
        scope=[_w.c.seller_id == seller_id, _w.c.environment == environment],
        order="desc",
    )


def pending_approvals(
    conn: Connection, owner_id: str, environment: str, now: datetime, limit: int = 100
) -> list[Row[Any]]:
    """Approvals of the owner's wallet keys still waiting for a person (not expired),
    soonest to expire first, each with its key's name."""
    return list(
        conn.execute(
            select(_a, _k.c.name.label("key_name"))
            .join(_k, _k.c.id == _a.c.wallet_key_id)
            .where(
                _a.c.owner_id == owner_id,
                _a.c.environment == environment,
                _a.c.status == "pending",
                _a.c.expires_at > now,
                _k.c.owner_id == owner_id,
                _k.c.environment == environment,
            )
            .order_by(_a.c.expires_at, _a.c.id)
            .limit(limit)
        )
    )

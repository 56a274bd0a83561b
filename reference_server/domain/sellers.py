"""Sellers: created by an owner in one environment, authenticated by their own key."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select, update

from svc import Seller
from svc._money import from_micros

from ..ids import hash_key, new_id, new_key
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger

__all__ = ["create_seller", "get_seller", "list_sellers", "seller_model", "update_seller"]

_s = t.sellers


def create_seller(
    conn: Connection, *, owner_id: str, environment: str, name: str | None, now: datetime
) -> tuple[Row[Any], str]:
    """Insert a seller, its balance account and its first key; return the row and key."""
    seller_id = new_id("sel")
    conn.execute(
        insert(_s).values(
            id=seller_id,
            owner_id=owner_id,
            environment=environment,
            name=name,
            mpp_enabled=False,
            x402_enabled=False,
            payouts_enabled=False,
            created_at=now,
        )
    )
    ledger.open_account(
        conn, environment=environment, kind=ledger.SELLER_BALANCE, ref_id=seller_id, now=now
    )
    key = new_key("sk", environment)
    conn.execute(
        insert(t.seller_keys).values(
            id=new_id("sk"),
            seller_id=seller_id,
            environment=environment,
            key_hash=hash_key(key),
            key_prefix=key[:16],
            created_at=now,
        )
    )
    return get_seller(conn, seller_id), key


def get_seller(conn: Connection, seller_id: str) -> Row[Any]:
    return conn.execute(select(_s).where(_s.c.id == seller_id)).one()


def list_sellers(conn: Connection, *, owner_id: str, environment: str) -> list[Row[Any]]:
    return list(
        conn.execute(
            select(_s)
            .where(_s.c.owner_id == owner_id, _s.c.environment == environment)
            .order_by(_s.c.created_at, _s.c.id)
        )
    )


def update_seller(conn: Connection, seller_id: str, **values: Any) -> Row[Any]:
    conn.execute(update(_s).where(_s.c.id == seller_id).values(**values))
    return get_seller(conn, seller_id)


def seller_model(conn: Connection, row: Row[Any]) -> Seller:
    balance = ledger.balance_micros(
        conn, environment=row.environment, kind=ledger.SELLER_BALANCE, ref_id=row.id
    )
    return Seller(
        id=row.id,
        environment=row.environment,
        name=row.name,
        mpp_enabled=row.mpp_enabled,
        x402_enabled=row.x402_enabled,
        payouts_enabled=row.payouts_enabled,
        payout_wallet_address=row.payout_wallet_address,
        processor_profile_id=row.processor_profile_id,
        balance=from_micros(balance),
        created_at=as_utc(row.created_at),
    )

"""Ledger accounts.

Every party that can hold money has one account per environment, named by ``kind`` and
``ref_id`` (a seller's balance, an owner's account wallet...).  Balances are integer
micro-units and change only through transfers, which arrive with the money core; this
module opens accounts and reads balances.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, select

from ..ids import new_id
from ..store import tables as t

__all__ = [
    "ENVIRONMENTS",
    "OWNER_WALLET",
    "SELLER_BALANCE",
    "balance_micros",
    "open_account",
]

#: The two money environments; they never share money, keys, webhooks or events.
ENVIRONMENTS = ("test", "live")

SELLER_BALANCE = "seller_balance"
OWNER_WALLET = "owner_wallet"

_a = t.ledger_accounts


def open_account(
    conn: Connection, *, environment: str, kind: str, ref_id: str, now: datetime
) -> str:
    account_id = new_id("acct")
    conn.execute(
        insert(_a).values(
            id=account_id,
            environment=environment,
            kind=kind,
            ref_id=ref_id,
            balance_micros=0,
            created_at=now,
        )
    )
    return account_id


def balance_micros(conn: Connection, *, environment: str, kind: str, ref_id: str) -> int:
    value = conn.execute(
        select(_a.c.balance_micros).where(
            _a.c.environment == environment, _a.c.kind == kind, _a.c.ref_id == ref_id
        )
    ).scalar()
    return int(value or 0)

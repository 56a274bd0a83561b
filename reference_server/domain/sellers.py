"""Sellers: created by an owner in one environment, authenticated by their own key."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select, update

from svc import Recycled, Seller
from svc.money import format_micros, from_micros

from ..ids import hash_key, new_id, new_key
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger, paging
from .errors import DomainError, PaymentRefused
from .events import record_event
from .owners import find_owned_row
from .paging import Page, PageRequest

__all__ = [
    "create_seller",
    "find_owned_seller",
    "get_seller",
    "list_sellers",
    "recycle",
    "seller_model",
    "update_seller",
]

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


def list_sellers(
    conn: Connection, request: PageRequest, *, owner_id: str, environment: str
) -> Page:
    """The owner's sellers in ``environment``, oldest first."""
    scope = [_s.c.owner_id == owner_id, _s.c.environment == environment]
    return paging.page(conn, request, select(_s), table=_s, scope=scope, order="asc")


def update_seller(conn: Connection, seller_id: str, **values: Any) -> Row[Any]:
    conn.execute(update(_s).where(_s.c.id == seller_id).values(**values))
    return get_seller(conn, seller_id)


def seller_model(conn: Connection, row: Row[Any]) -> Seller:
    # What is available: a withdrawal in flight holds its amount (a pending transfer).
    account = ledger.account_id(
        conn, environment=row.environment, kind=ledger.SELLER_BALANCE, ref_id=row.id
    )
    balance = 0 if account is None else ledger.available_micros(conn, account)
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


def find_owned_seller(
    conn: Connection, seller_id: str, *, owner_id: str, environment: str
) -> Row[Any]:
    return find_owned_row(
        conn, _s, seller_id, owner_id=owner_id, environment=environment, what="seller"
    )


def recycle(
    conn: Connection, row: Row[Any], *, amount: int | None, request_id: str, now: datetime
) -> Recycled:
    """Seller balance → the owner's account wallet, where it can fund wallet keys.

    Records ``seller.withdrawn`` (destination ``account_wallet``) in the same transaction.
    """
    env = row.environment
    seller_acct, owner_acct, moved = take_from_balance(
        conn,
        row,
        to_kind=ledger.OWNER_WALLET,
        to_ref=row.owner_id,
        amount=amount,
        purpose="recycle",
        now=now,
    )
    ledger.transfer(
        conn,
        environment=env,
        debit=seller_acct,
        credit=owner_acct,
        amount=moved,
        kind="recycle",
        now=now,
        reference=row.id,
    )
    seller_balance = record_withdrawn(
        conn,
        row,
        amount=moved,
        destination="account_wallet",
        withdrawal_id=None,
        balance_account=seller_acct,
        request_id=request_id,
        now=now,
    )
    return Recycled(
        seller_id=row.id,
        environment=env,
        amount=from_micros(moved),
        seller_balance=from_micros(seller_balance),
        account_wallet_balance=from_micros(ledger.available_micros(conn, owner_acct)),
    )


def take_from_balance(
    conn: Connection,
    seller: Row[Any],
    *,
    to_kind: str,
    to_ref: str,
    amount: int | None,
    purpose: str,
    now: datetime,
    unit_micros: int = 1,
) -> tuple[str, str, int]:
    """Money leaving a seller balance (a recycle, a withdrawal): the seller's account and
    the one it goes to, both locked, and the micros to move (``None``: all available, in
    whole ``unit_micros``).
    Refused with 402 ``insufficient_funds`` (naming what is available to ``purpose``)
    when there is nothing, or not enough, available."""
    env = seller.environment
    seller_acct = ledger.ensure_account(
        conn, environment=env, kind=ledger.SELLER_BALANCE, ref_id=seller.id, now=now
    )
    to_acct = ledger.ensure_account(conn, environment=env, kind=to_kind, ref_id=to_ref, now=now)
    ledger.lock_accounts(conn, [seller_acct, to_acct])
    available = ledger.available_micros(conn, seller_acct)
    if amount is not None and amount % unit_micros:
        raise DomainError(
            "validation_error",
            f"The amount must be a whole multiple of {format_micros(unit_micros)} "
            f"(the smallest amount the payout processor moves) to {purpose}.",
            details={"errors": [{"field": "amount", "message": "not a whole cent"}]},
        )
    moved = available - available % unit_micros if amount is None else amount
    if moved <= 0 or moved > available:
        raise insufficient_balance(available, purpose)
    return seller_acct, to_acct, moved


def insufficient_balance(available: int, purpose: str) -> PaymentRefused:
    """402 ``insufficient_funds`` for money a seller balance cannot give."""
    return PaymentRefused(
        "insufficient_funds",
        f"The seller balance has {format_micros(available)} available to {purpose}.",
        details={"available": format_micros(available)},
    )


def record_withdrawn(
    conn: Connection,
    seller: Row[Any],
    *,
    amount: int,
    destination: str,
    withdrawal_id: str | None,
    balance_account: str,
    request_id: str | None,
    now: datetime,
) -> int:
    """``seller.withdrawn`` for money that left the balance (to the owner's account wallet,
    or held for a payout); the balance it leaves, in micros."""
    balance = ledger.available_micros(conn, balance_account)
    record_event(
        conn,
        owner_id=seller.owner_id,
        environment=seller.environment,
        type="seller.withdrawn",
        data={
            "seller_id": seller.id,
            "amount": format_micros(amount),
            "destination": destination,
            "withdrawal_id": withdrawal_id,
            "balance": format_micros(balance),
            "request_id": request_id,
            "environment": seller.environment,
        },
        now=now,
    )
    return balance

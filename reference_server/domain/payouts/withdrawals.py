"""Withdrawals: seller balance out through the ledger to the payout account.

A withdrawal holds its amount from the moment it exists: a pending transfer from the
seller balance to :data:`~..ledger.PROCESSOR_PAYOUTS` (the ledger's conditional reserve,
so concurrent withdrawals can never hold more than the balance).  The outbox worker
(:mod:`.progress`) then creates the processor's payout and follows it: ``paid`` posts the
transfer, ``failed`` voids it and the money is available again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from svc import Withdrawal
from svc.money import from_micros

from ...ids import new_id
from ...store import tables as t
from ...timeutil import as_utc
from .. import ledger, paging
from ..errors import DomainError
from ..paging import Page, PageRequest
from ..sellers import insufficient_balance, record_withdrawn, take_from_balance
from .connect import account_of

__all__ = [
    "ACTIVE",
    "find_withdrawal",
    "list_withdrawals",
    "withdraw",
    "withdrawal_model",
]

_w = t.withdrawals
#: Statuses of a withdrawal whose money is still held (not final).
ACTIVE = ("pending", "in_transit")


def _not_enabled() -> DomainError:
    return DomainError(
        "payouts_not_enabled",
        "Payouts are not enabled for this seller yet. Check the readiness flags with "
        "GET /sellers/me/balance (payouts_enabled) before retrying: a human completes the "
        "onboard_url from POST /sellers/me/connect/onboard, then POST /sellers/me/connect/sync.",
    )


def withdraw(
    conn: Connection,
    seller: Row[Any],
    *,
    amount: int | None,
    processor: str,
    request_id: str | None,
    now: datetime,
    automatic: bool = False,
    unit_micros: int = 1,
) -> Row[Any]:
    """Hold ``amount`` (``None``: all that is available) of the seller balance for a new
    payout; records ``seller.withdrawn``.  Refused before payouts are enabled, and beyond
    the available balance (402 ``insufficient_funds``, nothing held).  The processor moves
    whole ``unit_micros`` (Stripe: cents): all that is available is rounded down to them,
    and an amount that is not a whole number of them is refused."""
    account = account_of(conn, seller.id)
    if account is None or not account.payouts_enabled or not seller.payouts_enabled:
        raise _not_enabled()
    env = seller.environment
    balance_acct, payouts_acct, moved = take_from_balance(
        conn,
        seller,
        to_kind=ledger.PROCESSOR_PAYOUTS,
        to_ref=ledger.PLATFORM,
        amount=amount,
        purpose="withdraw",
        now=now,
        unit_micros=unit_micros,
    )
    withdrawal_id = new_id("wd")
    try:
        transfer_id = ledger.reserve(
            conn,
            environment=env,
            debit=balance_acct,
            credit=payouts_acct,
            amount=moved,
            kind="withdrawal",
            now=now,
            reference=withdrawal_id,
        )
    except ledger.InsufficientFunds as exc:  # taken by a concurrent withdrawal meanwhile
        raise insufficient_balance(exc.available, "withdraw") from None
    conn.execute(
        insert(_w).values(
            id=withdrawal_id,
            seller_id=seller.id,
            environment=env,
            amount_micros=moved,
            status="pending",
            automatic=automatic,
            transfer_id=transfer_id,
            processor=processor,
            next_check_at=now,
            request_id=request_id,
            created_at=now,
            updated_at=now,
        )
    )
    record_withdrawn(
        conn,
        seller,
        amount=moved,
        destination="payout_account",
        withdrawal_id=withdrawal_id,
        balance_account=balance_acct,
        request_id=request_id,
        now=now,
    )
    return find_withdrawal(conn, seller.id, withdrawal_id)


def find_withdrawal(conn: Connection, seller_id: str, withdrawal_id: str) -> Row[Any]:
    row = conn.execute(
        select(_w).where(_w.c.id == withdrawal_id, _w.c.seller_id == seller_id)
    ).first()
    if row is None:
        raise DomainError("not_found", "No such withdrawal.")
    return row


def list_withdrawals(conn: Connection, request: PageRequest, *, seller_id: str) -> Page:
    """The seller's withdrawals, newest first."""
    return paging.page(
        conn, request, select(_w), table=_w, scope=[_w.c.seller_id == seller_id], order="desc"
    )


def withdrawal_model(row: Row[Any]) -> Withdrawal:
    return Withdrawal(
        id=row.id,
        status=row.status,
        amount=from_micros(row.amount_micros),
        seller_id=row.seller_id,
        environment=row.environment,
        automatic=row.automatic,
        failure_reason=row.failure_reason,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )

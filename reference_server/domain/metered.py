"""Metered payments on the ledger rail: hold the maximum, capture what was used.

``POST /pay`` on a metered resource (:func:`authorize`) holds the resource's maximum on
the wallet key as a *pending* transfer from the key's account to the seller's balance
(``metered_hold``): the balances do not move, so the ledger stays balanced, but the
key's available balance is down by the maximum, and its policy counts the maximum.
The receipt is ``authorized``, with ``amount`` the maximum; no event yet.

``POST /receipts/{id}/capture`` (:func:`capture`) voids the hold, gives the policy back
what was not used, and books the used amount as an ordinary sale (``payments.book_sale``:
the fee, the transfers and ``payment.succeeded`` as ``POST /pay`` writes them); zero
units release it (nothing moves, no event).  A receipt is captured or released once:
the first conditional change of its status wins, on SQLite and PostgreSQL alike.  An
authorization never captured is released after :data:`AUTHORIZATION_TTL` by the
housekeeping sweep (:func:`expire_authorizations`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, or_, select, update

from svc import PayResult, Receipt, Role
from svc.money import from_micros, metered_amount, to_micros

from ..ids import new_id
from ..invariant import InvariantError
from ..store import Database
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger, wallets
from .errors import DomainError
from .payments import book_sale
from .principal import Principal

__all__ = [
    "AUTHORIZATION_TTL",
    "authorize",
    "capture",
    "expire_authorizations",
    "readable_receipt",
    "readable_row",
    "receipt_model",
]

#: How long a metered authorization holds the payer's money before the sweep releases
#: it: far past any answer a gate streams, short enough that an agent's money is not
#: locked for long by a gate that crashed before capturing.
AUTHORIZATION_TTL = timedelta(hours=1)

_r = t.receipts
_HOLD_KIND = "metered_hold"


def authorize(
    conn: Connection,
    *,
    wallet_key_id: str,
    resource: Row[Any],
    request_id: str,
    now: datetime,
) -> PayResult:
    """``POST /pay`` on a metered resource: hold its maximum (see the module)."""
    held = int(resource.amount_micros)
    env = resource.environment
    receipt_id = new_id("rcpt")
    debit, seller_account = ledger.find_accounts(
        conn,
        environment=env,
        named=[(ledger.WALLET_KEY, wallet_key_id), (ledger.SELLER_BALANCE, resource.seller_id)],
        now=now,
    )
    # The key's lock first, as every payment takes it, then the account's.
    key = wallets.charge(conn, wallet_key_id, held, rail="rill", host=None, now=now)
    if key.environment != env:
        raise InvariantError("a wallet key pays in its own environment")
    try:
        transfer_id = ledger.reserve(
            conn,
            environment=env,
            debit=debit,
            credit=seller_account,
            amount=held,
            kind=_HOLD_KIND,
            now=now,
            receipt_id=receipt_id,
            wallet_key_id=wallet_key_id,
            reference=resource.id,
        )
    except ledger.InsufficientFunds:
        raise wallets.insufficient_funds(conn, key, held) from None
    conn.execute(
        _r.insert().values(
            id=receipt_id,
            environment=env,
            kind="resource",
            rail="rill",
            settlement="ledger",
            status="authorized",
            amount_micros=held,
            max_amount_micros=held,
            fee_micros=0,
            resource_id=resource.id,
            seller_id=resource.seller_id,
            wallet_key_id=wallet_key_id,
            transfer_id=transfer_id,
            metadata=dict(resource.metadata),
            request_id=request_id,
            created_at=now,
        )
    )
    return PayResult(
        receipt_id=receipt_id,
        rail="rill",
        amount=from_micros(held),
        resource_id=resource.id,
        settlement="ledger",
    )


def capture(
    conn: Connection,
    *,
    receipt_id: str,
    seller_id: str,
    environment: str,
    units: int,
    fee_bps: int,
    request_id: str,
    now: datetime,
) -> Receipt:
    """Capture ``units`` of the seller's authorized receipt (see the module); another
    seller's or environment's receipt is ``not_found``, one not authorized (captured,
    released, or not metered) ``receipt_not_authorized``."""
    mine = (_r.c.id == receipt_id, _r.c.seller_id == seller_id, _r.c.environment == environment)
    row = _claim(conn, mine, units, now)
    if row is None:
        if conn.execute(select(_r.c.id).where(*mine)).first() is None:
            raise DomainError("not_found", f"No receipt {receipt_id} in {environment}.")
        raise DomainError(
            "receipt_not_authorized",
            f"Receipt {receipt_id} holds no authorization to capture: it was captured or "
            "released already, or is not a metered payment.",
        )
    resource = conn.execute(select(t.resources).where(t.resources.c.id == row.resource_id)).one()
    used = to_micros(
        metered_amount(
            units, from_micros(resource.unit_price_micros), from_micros(row.max_amount_micros)
        )
    )
    _release_hold(conn, row, keep=used, now=now)
    if used:
        seller = conn.execute(select(t.sellers).where(t.sellers.c.id == seller_id)).one()
        debit = ledger.account_id(
            conn, environment=environment, kind=ledger.WALLET_KEY, ref_id=row.wallet_key_id
        )
        book_sale(
            conn,
            resource=resource,
            seller=seller,
            rail="rill",
            settlement="ledger",
            amount=used,
            debit=debit,
            fee_bps=fee_bps,
            request_id=request_id,
            now=now,
            wallet_key_id=row.wallet_key_id,
            receipt_id=receipt_id,
            captured_units=units,
        )
    return receipt_model(_read(conn, _r.c.id == receipt_id))


def _claim(conn: Connection, mine: tuple[Any, ...], units: int, now: datetime) -> Row[Any] | None:
    """Take the receipt out of ``authorized`` (the one change that can win), or ``None``.

    Settled here with nothing charged; a capture of some units books the sale after."""
    status = "released" if units == 0 else "settled"
    return conn.execute(
        update(_r)
        .where(*mine, _r.c.status == "authorized", _r.c.rail == "rill")
        .values(status=status, amount_micros=0, units=units, settled_at=now)
        .returning(*_r.c)
    ).first()


def _release_hold(conn: Connection, row: Row[Any], *, keep: int, now: datetime) -> None:
    """Void the hold and give the policy back what is not kept: the key's lock first (as
    every payment takes it), then the account's (voiding releases its pending amount)."""
    held = int(row.max_amount_micros)
    if held > keep:
        wallets.refund_charge(conn, row.wallet_key_id, held - keep, charged_at=row.created_at)
    else:
        wallets.lock_wallet_key(conn, row.wallet_key_id)
    ledger.void(conn, row.transfer_id, now)


def expire_authorizations(db: Database, *, now: datetime) -> int:
    """Release every authorization older than :data:`AUTHORIZATION_TTL` (a gate that
    never captured); returns how many.  Each in its own transaction; one a capture won
    meanwhile is skipped.  A release writes no event."""
    with db.read() as conn:
        stale = conn.execute(
            select(_r.c.id).where(
                _r.c.status == "authorized", _r.c.created_at < now - AUTHORIZATION_TTL
            )
        ).scalars()
        ids = list(stale)
    released = 0
    for receipt_id in ids:
        with db.write() as conn:
            row = _claim(conn, (_r.c.id == receipt_id,), 0, now)
            if row is not None:
                _release_hold(conn, row, keep=0, now=now)
                released += 1
    return released


def readable_receipt(conn: Connection, receipt_id: str, caller: Principal) -> Receipt:
    """``GET /receipts/{id}``: the receipt if ``caller`` is a side of it (see
    :func:`readable_row`)."""
    row = readable_row(conn, receipt_id, caller)
    if row is None:
        raise DomainError("not_found", f"No receipt {receipt_id} in {caller.environment}.")
    seller_side = caller.role is Role.SELLER or (
        caller.role is Role.OWNER and row.seller_owner_id == caller.owner_id
    )
    return receipt_model(row, seller_side=seller_side)


def readable_row(conn: Connection, receipt_id: str, caller: Principal) -> Any:
    """The receipt's row if ``caller`` is a side of it in its own environment (the
    wallet key that paid or the seller paid, or the owner of either, or the owner a
    handle payment reached); else ``None``, for the caller's ``not_found`` (never a 403
    that would tell the receipt exists)."""
    sides: Any
    if caller.role is Role.SELLER:
        sides = _r.c.seller_id == caller.subject_id
    elif caller.role is Role.WALLET:
        sides = _r.c.wallet_key_id == caller.subject_id
    else:
        owner = caller.owner_id
        sides = or_(
            _r.c.wallet_key_id.in_(
                select(t.wallet_keys.c.id).where(t.wallet_keys.c.owner_id == owner)
            ),
            _r.c.seller_id.in_(select(t.sellers.c.id).where(t.sellers.c.owner_id == owner)),
            _r.c.destination_owner_id == owner,
        )
    return _read(conn, _r.c.id == receipt_id, _r.c.environment == caller.environment, sides)


def _read(conn: Connection, *where: Any) -> Any:
    s = t.sellers
    return conn.execute(
        select(_r, t.resources.c.unit, s.c.owner_id.label("seller_owner_id"))
        .outerjoin(t.resources, t.resources.c.id == _r.c.resource_id)
        .outerjoin(s, s.c.id == _r.c.seller_id)
        .where(*where)
    ).first()


def receipt_model(row: Row[Any], *, seller_side: bool = True) -> Receipt:
    """The receipt as its payer or seller reads it (a row of :func:`_read`); the
    seller's id only to the seller's side (it is the seller's own, as the payer's wallet
    key is the payer's: the resource, public, is what the payer knows)."""
    settled_at = row.settled_at or (row.created_at if row.status == "settled" else None)
    return Receipt(
        id=row.id,
        status=row.status,
        amount=from_micros(row.amount_micros),
        rail=row.rail,
        resource_id=row.resource_id,
        seller_id=row.seller_id if seller_side else None,
        units=row.units,
        unit=row.unit if row.max_amount_micros is not None else None,
        max_amount=None if row.max_amount_micros is None else from_micros(row.max_amount_micros),
        tx_hash=row.tx_hash,
        network=row.network,
        environment=row.environment,
        created_at=as_utc(row.created_at),
        settled_at=None if settled_at is None else as_utc(settled_at),
    )

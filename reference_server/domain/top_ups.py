"""Top-ups: an owner pays the environment's deposit address from a wallet they control.

Real money comes in here: ``POST /owners/me/top-ups`` answers 402 with the open rails'
challenges (:func:`reference_server.domain.open_rails.service_challenge`) and, retried
with the credential, settles it (:func:`~reference_server.domain.open_rails.pay_service`).
:func:`book` then runs in the transaction that records the settlement: the amount moves
from ``chain_deposits`` (tokens that reached the deposit address) to the owner's account
wallet, the ``top_ups`` row keeps the transaction hash (unique: booked once), and
``funding.paid`` says which rail paid and in which transaction.

A card top-up (``method`` ``card``, live with the processor) is a ``pending`` row first
(:func:`open_card`, no transfer or transaction yet), paid at the processor's Checkout;
:func:`book_card` credits it once when ``checkout.session.completed`` arrives, from the
processor's clearing account (as a card sale is), with the PaymentIntent id as its
unique reference; :func:`close_card` marks a declined or abandoned one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select, update

from svc import TopUp
from svc.money import format_micros, from_micros

from ..ids import new_id
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger
from .events import record_event
from .open_rails import Settled
from .owners import find_owned_row

__all__ = [
    "CARD",
    "book",
    "book_card",
    "close_card",
    "find_by_record",
    "find_owned",
    "fingerprint",
    "open_card",
    "top_up_model",
]

_t = t.top_ups
#: The rail (and ``method``) of a top-up paid by card at the processor.
CARD = "card"


def book(
    conn: Connection,
    settled: Settled,
    *,
    owner_id: str,
    environment: str,
    amount: int,
    record_id: int | None,
    request_id: str,
    now: datetime,
) -> Row[Any]:
    """Credit a settled top-up to the owner's account wallet; returns its row.

    Money that arrived is always credited: when a request that took its
    ``Idempotency-Key`` over (the first one's lease ran out) booked first, this one is
    booked too, under no key."""
    scope = {"owner_id": owner_id, "environment": environment}
    if record_id is not None and find_by_record(conn, record_id, **scope) is not None:
        record_id = None
    deposits = ledger.platform_account(
        conn, environment=environment, kind=ledger.CHAIN_DEPOSITS, now=now
    )
    top_up_id = new_id("tu")
    paid = {"tx_hash": settled.tx_hash, "payer": settled.payer, "network": settled.network}
    transfer = _credit(
        conn, deposits, owner_id, environment, amount, top_up_id, now, source=settled.rail, **paid
    )
    values = {"status": "succeeded", "rail": settled.rail, "transfer_id": transfer, **paid}
    return _insert(
        conn, top_up_id, owner_id, environment, amount, record_id, request_id, now, values
    )


def _credit(
    conn: Connection,
    debit: str,
    owner_id: str,
    environment: str,
    amount: int,
    top_up_id: str,
    now: datetime,
    **paid: str | None,
) -> str:
    """Move ``amount`` from the ``debit`` account to the owner's account wallet, and say so
    (``funding.paid``, with ``paid``: how it was paid); the transfer's id."""
    wallet = ledger.ensure_account(
        conn, environment=environment, kind=ledger.OWNER_WALLET, ref_id=owner_id, now=now
    )
    ledger.lock_accounts(conn, [debit, wallet])
    transfer = ledger.transfer(
        conn,
        environment=environment,
        debit=debit,
        credit=wallet,
        amount=amount,
        kind="top_up",
        now=now,
        reference=top_up_id,
    )
    record_event(
        conn,
        owner_id=owner_id,
        environment=environment,
        type="funding.paid",
        data={
            "wallet_key_id": None,
            "top_up_id": top_up_id,
            "amount": format_micros(amount),
            "account_wallet_balance": format_micros(ledger.available_micros(conn, wallet)),
            **paid,
            "transfer_id": transfer,
            "environment": environment,
        },
        now=now,
    )
    return transfer


def _insert(
    conn: Connection,
    top_up_id: str,
    owner_id: str,
    environment: str,
    amount: int,
    record_id: int | None,
    request_id: str,
    now: datetime,
    values: dict[str, Any],
) -> Row[Any]:
    """The top-up's row, written with ``values`` (how it is paid, and how far)."""
    return conn.execute(
        insert(_t)
        .values(
            id=top_up_id,
            owner_id=owner_id,
            environment=environment,
            amount_micros=amount,
            idempotency_record_id=record_id,
            request_id=request_id,
            created_at=now,
            **values,
        )
        .returning(*_t.c)
    ).one()


def open_card(
    conn: Connection,
    *,
    owner_id: str,
    environment: str,
    amount: int,
    record_id: int | None,
    request_id: str,
    now: datetime,
) -> Row[Any]:
    """A card top-up waiting for the payer at the processor's Checkout: ``pending``,
    nothing credited."""
    values = {"status": "pending", "rail": CARD, "network": "stripe"}
    return _insert(
        conn, new_id("tu"), owner_id, environment, amount, record_id, request_id, now, values
    )


def book_card(conn: Connection, top_up_id: str, *, payment_intent: str, now: datetime) -> bool:
    """Credit a card top-up the processor was paid for, once: ``False`` when it was
    credited already.  A declined one (``failed``) that the payer then paid with another
    card is credited too."""
    row = conn.execute(select(_t).where(_t.c.id == top_up_id)).one()
    claimed = conn.execute(
        update(_t)
        .where(_t.c.id == top_up_id, _t.c.transfer_id.is_(None), _t.c.status != "succeeded")
        .values(status="succeeded", tx_hash=payment_intent)
    ).rowcount
    if claimed != 1:
        return False
    env, owner_id, amount = row.environment, row.owner_id, int(row.amount_micros)
    clearing = ledger.ensure_account(
        conn, environment=env, kind=ledger.PROCESSOR_CLEARING, ref_id=ledger.PLATFORM, now=now
    )
    paid = {"tx_hash": None, "payer": None, "network": None}
    transfer = _credit(
        conn,
        clearing,
        owner_id,
        env,
        amount,
        top_up_id,
        now,
        source=CARD,
        **paid,
        processor_payment_intent_id=payment_intent,
    )
    conn.execute(update(_t).where(_t.c.id == top_up_id).values(transfer_id=transfer))
    return True


def close_card(conn: Connection, top_up_id: str, *, status: str) -> None:
    """A card top-up that was not paid: ``failed`` (declined) or ``expired`` (abandoned);
    nothing is credited, and a credited one is left alone."""
    conn.execute(
        update(_t).where(_t.c.id == top_up_id, _t.c.transfer_id.is_(None)).values(status=status)
    )


def find_owned(conn: Connection, top_up_id: str, *, owner_id: str, environment: str) -> Row[Any]:
    return find_owned_row(
        conn, _t, top_up_id, owner_id=owner_id, environment=environment, what="top-up"
    )


def find_by_record(
    conn: Connection, record_id: int, *, owner_id: str, environment: str
) -> Row[Any] | None:
    """The top-up an ``Idempotency-Key`` (its record in the one store) already made for
    this owner in this environment: scoped at the query, not only through the record's
    scope."""
    q = select(_t).where(
        _t.c.idempotency_record_id == record_id,
        _t.c.owner_id == owner_id,
        _t.c.environment == environment,
    )
    return conn.execute(q).first()


def fingerprint(amount: int, *, card: bool) -> str:
    """What makes two top-ups under one key the same request: the amount and the method
    (``0.3`` and ``0.30`` are one amount), whatever else the body says."""
    return f"top-up:{amount}:{CARD if card else 'crypto'}"


def top_up_model(row: Row[Any], *, checkout_url: str | None = None) -> TopUp:
    """The API's top-up; ``checkout_url`` where a pending card top-up is paid."""
    return TopUp(
        id=row.id,
        amount=from_micros(int(row.amount_micros)),
        environment=row.environment,
        status=row.status,
        rail=row.rail,
        network=row.network,
        tx_hash=row.tx_hash,
        payer=row.payer,
        created_at=as_utc(row.created_at),
        method=CARD if row.rail == CARD else "crypto",
        checkout_url=checkout_url if row.status == "pending" else None,
    )

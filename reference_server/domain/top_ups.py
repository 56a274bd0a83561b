"""Top-ups: an owner pays the environment's deposit address from a wallet they control.

Real money comes in here: ``POST /owners/me/top-ups`` answers 402 with the open rails'
challenges (:func:`reference_server.domain.open_rails.service_challenge`) and, retried
with the credential, settles it (:func:`~reference_server.domain.open_rails.pay_service`).
:func:`book` then runs in the transaction that records the settlement: the amount moves
from ``chain_deposits`` (tokens that reached the deposit address) to the owner's account
wallet, the ``top_ups`` row keeps the transaction hash (unique: booked once), and
``funding.paid`` says which rail paid and in which transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select

from svc import TopUp
from svc.money import format_micros, from_micros

from ..ids import new_id
from ..store import tables as t
from . import ledger
from .errors import DomainError
from .events import record_event
from .open_rails import Settled

__all__ = ["book", "find_by_key", "find_owned", "top_up_model"]

_t = t.top_ups


def book(
    conn: Connection,
    settled: Settled,
    *,
    owner_id: str,
    environment: str,
    amount: int,
    idempotency_key: str | None,
    request_id: str,
    now: datetime,
) -> Row[Any]:
    """Credit a settled top-up to the owner's account wallet; returns its row.

    Money that arrived is always credited: when a concurrent request with the same
    ``Idempotency-Key`` (and another credential) booked first, this one is booked too,
    under no key."""
    if idempotency_key is not None and find_by_key(
        conn, owner_id=owner_id, environment=environment, key=idempotency_key
    ):
        idempotency_key = None
    deposits = ledger.platform_account(
        conn, environment=environment, kind=ledger.CHAIN_DEPOSITS, now=now
    )
    wallet = ledger.ensure_account(
        conn, environment=environment, kind=ledger.OWNER_WALLET, ref_id=owner_id, now=now
    )
    ledger.lock_accounts(conn, [deposits, wallet])
    top_up_id = new_id("tu")
    transfer = ledger.transfer(
        conn,
        environment=environment,
        debit=deposits,
        credit=wallet,
        amount=amount,
        kind="top_up",
        now=now,
        reference=top_up_id,
    )
    conn.execute(
        insert(_t).values(
            id=top_up_id,
            owner_id=owner_id,
            environment=environment,
            amount_micros=amount,
            status="succeeded",
            rail=settled.rail,
            network=settled.network,
            tx_hash=settled.tx_hash,
            payer=settled.payer,
            transfer_id=transfer,
            idempotency_key=idempotency_key,
            request_id=request_id,
            created_at=now,
        )
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
            "source": settled.rail,
            "tx_hash": settled.tx_hash,
            "payer": settled.payer,
            "network": settled.network,
            "transfer_id": transfer,
            "environment": environment,
        },
        now=now,
    )
    return conn.execute(select(_t).where(_t.c.id == top_up_id)).one()


def find_owned(conn: Connection, top_up_id: str, *, owner_id: str, environment: str) -> Row[Any]:
    row = conn.execute(
        select(_t).where(
            _t.c.id == top_up_id, _t.c.owner_id == owner_id, _t.c.environment == environment
        )
    ).first()
    if row is None:
        raise DomainError("not_found", "No such top-up.")
    return row


def find_by_key(conn: Connection, *, owner_id: str, environment: str, key: str) -> Row[Any] | None:
    """The top-up an ``Idempotency-Key`` already paid, if any."""
    return conn.execute(
        select(_t).where(
            _t.c.owner_id == owner_id,
            _t.c.environment == environment,
            _t.c.idempotency_key == key,
        )
    ).first()


def top_up_model(row: Row[Any]) -> TopUp:
    return TopUp(
        id=row.id,
        amount=from_micros(int(row.amount_micros)),
        environment=row.environment,
        status=row.status,
        rail=row.rail,
        network=row.network,
        tx_hash=row.tx_hash,
        payer=row.payer,
        created_at=row.created_at,
    )

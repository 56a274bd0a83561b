"""Refunds sent on chain: an open-rail payment settled ``processor_deposit`` (the payer's
USDC went to the service's deposit address, the ledger credited the seller) is given back
from the hot wallet to the payer's address (``receipts.payer``, who signed the payment).

Like a withdrawal (:mod:`.payouts.withdrawals`), a refund holds its money from the moment
it exists: pending ledger transfers from the seller's balance (and the fee shard's share)
to ``chain_payouts``, the account of what the hot wallet paid out, in the request's
transaction.  The worker (:func:`advance_due`, each outbox round) then sends it: a
transfer whose EIP-3009 nonce is derived from the refund's id, so however often it is
sent, by however many workers or after a crash between the books and the chain, the token
moves it once.  Confirmed, the transfers post (``succeeded``, ``payment.refunded``);
failed, they are voided and the receipt's ``refunded_micros`` given back (``failed``,
``payment.refund_failed``).

In ``test`` the sandbox chain carries it: the hot wallet is minted exactly the amount (as
for a pay-url payment) and pays it in the worker's one transaction, so it is confirmed as
it is sent.  In ``live`` the facilitator settles the hot wallet's signed transfer, and the
token is asked first whether the nonce was used (:mod:`.refunds_live`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from sqlalchemy import Connection, Row, Select, and_, select, update

from ..context import ServerContext
from ..sandbox import chain
from ..sandbox.eip3009 import Authorization, signing_digest
from ..store import tables as t
from ..telemetry import span
from . import ledger
from .events import NEW_DELIVERIES
from .paid_fetch.hot_wallet import hot_wallet
from .refund_shares import move_shares

__all__ = [
    "CARRIED",
    "Announce",
    "advance_due",
    "carries",
    "conclude",
    "hold",
    "lease_due",
    "locked_pending",
    "nonce_of",
]

_f = t.refunds
_r = t.receipts
#: How long the hot wallet's signed transfer may be settled.
_VALID = timedelta(hours=1)


def carries(receipt: Row[Any]) -> bool:
    """Whether this module refunds ``receipt``: an open-rail payment whose money the
    service holds, with a payer's address to send to."""
    return (
        receipt.rail != "rill" and receipt.settlement == "processor_deposit" and bool(receipt.payer)
    )


#: :func:`carries` as a condition on ``receipts``, for the worker's reads of pending
#: refunds (a live card refund is pending too, and is the processor's).
CARRIED = and_(
    _r.c.rail != "rill",
    _r.c.settlement == "processor_deposit",
    _r.c.payer.is_not(None),
    _r.c.payer != "",
)


def hold(
    conn: Connection,
    receipt: Row[Any],
    amount: int,
    *,
    fee_back: int,
    fees: str | None,
    refund_id: str,
    now: datetime,
) -> str:
    """Hold the refund's money for the chain: ``amount - fee_back`` of the seller's
    balance and ``fee_back`` of the fee shard, as pending transfers to a ``chain_payouts``
    shard (the conditional reserve: never past the seller's available balance, raising
    :class:`~.ledger.InsufficientFunds`).  Returns the seller's transfer."""
    env = receipt.environment
    seller, payouts = ledger.find_accounts(
        conn,
        environment=env,
        named=[
            (ledger.SELLER_BALANCE, receipt.seller_id),
            (ledger.CHAIN_PAYOUTS, ledger.platform_shard()),
        ],
        now=now,
    )
    ledger.lock_accounts(conn, [a for a in (seller, payouts, fees) if a is not None])
    return move_shares(
        conn,
        receipt,
        amount,
        fee_back=fee_back,
        fees=fees,
        seller=seller,
        to=payouts,
        hold=True,
        now=now,
        reference=refund_id,
    )


def nonce_of(refund_id: str) -> str:
    """The EIP-3009 nonce of a refund's transfer: one per refund, so it moves once."""
    return "0x" + bytes(keccak(b"svc-refund:" + refund_id.encode())).hex()


#: Records the event of a refund's outcome (``payment.refunded`` or
#: ``payment.refund_failed``): (conn, receipt, refund, now).
Announce = Callable[[Connection, Row[Any], Row[Any], datetime], None]


def advance_due(ctx: ServerContext, announce: Announce) -> bool:
    """Send each pending ``test`` refund that is due, on the sandbox chain (``live``'s:
    :mod:`.refunds_live`); ``True`` when events were recorded."""
    now = ctx.now()
    with ctx.db.read() as conn:
        due = list(
            conn.execute(
                select(_f.c.id, _f.c.request_id)
                .where(
                    _f.c.environment == "test",
                    _f.c.status == "pending",
                    _f.c.next_check_at <= now,
                )
                .order_by(_f.c.next_check_at)
                .limit(ctx.settings.worker_batch_size)
            ).all()
        )
    queued = False
    for refund_id, request_id in due:
        names = {"svc.refund_id": refund_id, "svc.origin_request_id": request_id}
        with span("chain refund", **names), ctx.db.write() as conn:
            _send_on_sandbox(ctx, conn, refund_id, announce)
            queued = bool(conn.info.pop(NEW_DELIVERIES, False)) or queued
    return queued


def lease_due(conn: Connection, query: Select[Any], now: datetime, lease: timedelta) -> list[Any]:
    """The pending refunds ``query`` finds due (a worker's batch), each leased for
    ``lease`` (its ``next_check_at`` moved on) so that one worker of several takes it at a
    time; one that stops mid-call leaves it to be taken again when the lease ends.  On
    PostgreSQL another worker's rows are skipped, not waited for."""
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(of=_f, skip_locked=True)
    rows = list(conn.execute(query))
    if rows:
        conn.execute(
            update(_f)
            .where(_f.c.id.in_([row.id for row in rows]))
            .values(next_check_at=now + lease)
        )
    return rows


def locked_pending(conn: Connection, refund_id: str) -> Row[Any] | None:
    """The refund if it is still ``pending``, under its row lock (PostgreSQL; another
    worker's skipped); ``None`` once concluded."""
    query = select(_f).where(_f.c.id == refund_id, _f.c.status == "pending")
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return conn.execute(query).first()


def _send_on_sandbox(
    ctx: ServerContext, conn: Connection, refund_id: str, announce: Announce
) -> None:
    """Send one refund on the sandbox chain and conclude it, in one transaction: the hot
    wallet is minted the amount and signs its transfer to the payer under the refund's
    nonce (a second send of it is refused by the chain, and rolls back with its mint)."""
    now = ctx.now()
    row = locked_pending(conn, refund_id)
    if row is None:  # concluded meanwhile by another worker
        return
    payer = _locked_payer(conn, row)
    _held(conn, row)  # the accounts' locks before the chain's rows, as pay-url takes them
    wallet = hot_wallet(ctx, row.environment)
    amount = int(row.amount_micros)
    auth = Authorization(
        from_address=wallet.address,
        to=str(to_checksum_address(payer)),
        value=amount,
        valid_after=0,
        valid_before=int((now + _VALID).timestamp()),
        nonce=nonce_of(row.id),
    )
    signature = wallet.account.unsafe_sign_hash(signing_digest(auth)).signature
    try:
        with conn.begin_nested():
            chain.mint(conn, to=wallet.address, value=amount, now=now)
            tx = chain.transfer_with_authorization(
                conn, auth, "0x" + bytes(signature).hex(), now=now
            )
    except chain.ChainError as exc:
        # Its nonce is spent only by this refund's own transfer, which commits with its
        # books: a spent nonce is that transfer; anything else, a failure to send.
        spent = chain.nonce_transaction(conn, wallet.address, auth.nonce)
        conclude(conn, row, spent, None if spent else exc.message, now, announce)
    else:
        conclude(conn, row, tx.hash, None, now, announce)


def _locked_payer(conn: Connection, row: Row[Any]) -> str:
    """The refund's receipt locked (before the accounts, in a refund request's order) and
    its payer."""
    query = select(_r.c.payer).where(_r.c.id == row.receipt_id).with_for_update()
    return str(conn.execute(query).scalar_one())


def _held(conn: Connection, row: Row[Any]) -> list[str]:
    """The refund's pending transfers, their accounts locked in id order (a posting takes
    them one by one otherwise, against a request locking them in order: a deadlock)."""
    tr = t.ledger_transfers
    held = conn.execute(
        select(tr.c.id, tr.c.debit_account_id, tr.c.credit_account_id).where(
            tr.c.reference == row.id, tr.c.receipt_id == row.receipt_id, tr.c.status == "pending"
        )
    ).all()
    ledger.lock_accounts(conn, [a for h in held for a in (h[1], h[2])])
    return sorted(h.id for h in held)


def conclude(
    conn: Connection,
    row: Row[Any],
    tx_hash: str | None,
    failure: str | None,
    now: datetime,
    announce: Announce,
) -> None:
    """Sent (``tx_hash``): the held transfers post.  Failed: they are voided and the
    receipt's ``refunded_micros`` lowered by the amount again (the seller may refund it
    anew).  Either way ``announce`` records the outcome's event."""
    _locked_payer(conn, row)
    for transfer_id in _held(conn, row):
        if tx_hash is not None:
            ledger.post(conn, transfer_id, now)
        else:
            ledger.void(conn, transfer_id, now)
    if tx_hash is None:
        conn.execute(
            update(_r)
            .where(_r.c.id == row.receipt_id)
            .values(refunded_micros=_r.c.refunded_micros - row.amount_micros)
        )
    conn.execute(
        update(_f)
        .where(_f.c.id == row.id)
        .values(
            status="succeeded" if tx_hash is not None else "failed",
            tx_hash=tx_hash,
            failure_reason=None if failure is None else failure[:500],
            next_check_at=None,
        )
    )
    receipt = conn.execute(select(_r).where(_r.c.id == row.receipt_id)).one()
    announce(conn, receipt, conn.execute(select(_f).where(_f.c.id == row.id)).one(), now)

"""The two movements every refund makes, whichever rail carries it: the platform fee's
share back from the fee shard that took it, and the rest from the seller's balance, to
the account the money leaves by (the payer's wallet key, the chain payouts shard, the
card processor's clearing account).  Posted at once, or held (pending) until the chain
or the processor confirms; the caller has taken the accounts' locks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row

from . import ledger

__all__ = ["fee_back", "move_shares", "seller_share_left"]


def fee_back(receipt: Row[Any], amount: int, *, refunded: int) -> int:
    """The platform fee's share given back with ``amount``, ``refunded`` counting it: the
    fee times the part refunded, on the total, so partial refunds add up to the whole fee."""
    paid, fee = int(receipt.amount_micros), int(receipt.fee_micros)
    return fee * refunded // paid - fee * (refunded - amount) // paid


def seller_share_left(receipt: Row[Any]) -> int:
    """What refunding all that is left of ``receipt`` takes from the seller's balance."""
    left = int(receipt.amount_micros) - int(receipt.refunded_micros)
    return left - fee_back(receipt, left, refunded=int(receipt.amount_micros))


def move_shares(
    conn: Connection,
    receipt: Row[Any],
    amount: int,
    *,
    fee_back: int,
    fees: str | None,
    seller: str,
    to: str,
    hold: bool,
    now: datetime,
    **refs: Any,
) -> str:
    """Moves ``fee_back`` from ``fees`` and ``amount - fee_back`` from ``seller`` to
    ``to``; raises :class:`~.ledger.InsufficientFunds` past the seller's available
    balance.  Returns the seller's transfer (the refund's)."""
    move = ledger.reserve if hold else ledger.transfer
    env = receipt.environment
    refs = {"receipt_id": receipt.id, **refs}
    if fees is not None and fee_back:
        move(
            conn,
            environment=env,
            debit=fees,
            credit=to,
            amount=fee_back,
            kind="refund_fee",
            now=now,
            **refs,
        )
    return move(
        conn,
        environment=env,
        debit=seller,
        credit=to,
        amount=amount - fee_back,
        kind="refund",
        now=now,
        **refs,
    )

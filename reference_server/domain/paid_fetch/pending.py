"""Live ``pay-url`` attempts left ``pending`` (the URL never confirmed), decided by the chain.

The hot wallet signed an EIP-3009 authorization; whether it settled is the token's to
say, through ``live_rpc_url``: its ``authorizationState(hot wallet, nonce)`` used, and the
transaction that used it moved exactly the amount to the offer's ``payTo``: post it.
Unused past the authorization's ``validBefore`` (kept in the pending error's details):
no block can include it any more, void the reservation and refund the key.  Otherwise it
waits.  :func:`.settlement.conclude` does either exactly once.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy import select

from ...context import ServerContext
from ...onchain import ChainUnreachable, TokenReader
from ...store import tables as t
from ..errors import DomainError
from .hot_wallet import hot_wallet
from .settlement import Verdict, conclude

__all__ = ["resolve_pending"]

log = logging.getLogger("reference_server.pay_url")
#: The chain's block time may run a little behind the host's clock.
_CLOCK_SKEW_SECONDS = 60


def resolve_pending(ctx: ServerContext, now: datetime | None = None) -> int:
    """Decide the live pending attempts the chain can decide ``now`` (blocking); how many
    were.  Without ``live_rpc_url`` (or a live hot wallet) they wait for an operator."""
    now = now or ctx.now()
    if not ctx.settings.live_rpc_url or not ctx.settings.live_hot_wallet_key:
        return 0
    reader = TokenReader(ctx.settings.live_rpc_url, hot_wallet(ctx, "live").token.address)
    _a = t.spend_attempts
    with ctx.db.read() as conn:
        rows = conn.execute(
            select(_a).where(_a.c.environment == "live", _a.c.status == "pending")
        ).all()
    decided = 0
    for row in rows:
        try:
            verdict, tx_hash = _verdict(reader, row, now)
        except ChainUnreachable:
            log.warning("the live chain did not answer; pending pay-url attempts wait")
            return decided
        if verdict is Verdict.UNKNOWN:
            continue
        with ctx.db.write() as conn:
            done = conclude(
                conn,
                attempt_id=row.id,
                verdict=verdict,
                tx_hash=tx_hash,
                answer=None,
                failure=DomainError(
                    "upstream_failed",
                    "The URL never confirmed the payment and the chain shows it never "
                    "settled (its authorization lapsed unused); nothing was charged.",
                    details={"host": row.host},
                ),
                box=ctx.box,
                request_id=row.request_id,
                now=now,
            )
        decided += done is not None
    if decided:
        ctx.notify_new_events()
    return decided


def _verdict(reader: TokenReader, row: Any, now: datetime) -> tuple[Verdict, str | None]:
    if reader.authorization_used(row.payer, row.nonce):
        tx_hash = reader.authorization_transaction(row.payer, row.nonce)
        if tx_hash is not None and reader.paid(
            tx_hash, sender=row.payer, receiver=row.pay_to, value=int(row.amount_micros)
        ):
            return Verdict.SETTLED, tx_hash
        return Verdict.UNKNOWN, None  # used, yet not as signed here: an operator's question
    valid_before = (row.error_details or {}).get("authorization_valid_before")
    if isinstance(valid_before, int) and valid_before + _CLOCK_SKEW_SECONDS < now.timestamp():
        return Verdict.NOT_SETTLED, None
    return Verdict.UNKNOWN, None

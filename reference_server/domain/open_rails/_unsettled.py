"""A live settlement the facilitator could not vouch for, decided by the chain.

When ``/settle`` times out, fails or says ``settlement_pending``, the payer's EIP-3009
authorization may or may not have been broadcast.  Neither crediting the seller nor
freeing the payer's claim is safe then: the hold is kept unsettled (:mod:`._holds`) and
the token decides.  Its ``authorizationState(from, nonce)`` used, and the transaction that
used it (its ``AuthorizationUsed`` log) moved the value to the payee: it settled, book
it.  Unused past ``validBefore``: no block can include it any more, release it.
Otherwise: ask again later.

An x402 ``upto`` hold (a Permit2 authorization, not EIP-3009) is not read here: it stays
undecided, for an operator, until Permit2's ``nonceBitmap`` is read for it.
"""

from __future__ import annotations

import enum
from datetime import datetime

from ...onchain import TokenReader
from ._holds import Hold

__all__ = ["CLOCK_SKEW_SECONDS", "Outcome", "chain_outcome"]

#: How far past ``validBefore`` the host's clock must be before an unused authorization
#: counts as dead: the chain's block time may run a little behind the host's.
CLOCK_SKEW_SECONDS = 60


class Outcome(enum.Enum):
    SETTLED = "settled"
    #: Never will: unused past its validity, or used by something that paid nobody here.
    NEVER = "never"
    UNDECIDED = "undecided"


def chain_outcome(reader: TokenReader, hold: Hold, now: datetime) -> tuple[Outcome, str | None]:
    """What the chain says of ``hold``'s authorization (blocking; raises
    :class:`~reference_server.onchain.ChainUnreachable`), and the settling transaction."""
    if hold.scheme == "upto":
        return Outcome.UNDECIDED, None
    payload = hold.payload
    payer, nonce = str(payload["from"]), str(payload["nonce"])
    if reader.authorization_used(payer, nonce):
        tx_hash = reader.authorization_transaction(payer, nonce)
        if tx_hash is None:  # the node has no log of it (pruned): cannot tell yet
            return Outcome.UNDECIDED, None
        value, payee = int(payload["value"]), str(payload["to"])
        if reader.paid(tx_hash, sender=payer, receiver=payee, value=value):
            return Outcome.SETTLED, tx_hash
        return Outcome.NEVER, None  # cancelled: nothing reached the payee
    if int(payload["validBefore"]) + CLOCK_SKEW_SECONDS < now.timestamp():
        return Outcome.NEVER, None
    return Outcome.UNDECIDED, None

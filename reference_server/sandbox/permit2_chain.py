"""x402's ``upto`` settlement on the sandbox chain: the upto proxy's ``settle``, which
moves tokens with Permit2's ``permitWitnessTransferFrom``.

The payer signed a maximum (:mod:`.permit2`); the facilitator settles the actual amount,
at most that maximum, once: the Permit2 nonce is spent with the move, through
:func:`.chain.move_once` (the same race-safe primary key, conditional debit and savepoint
as ``transferWithAuthorization``), recorded as a ``permitWitnessTransferFrom``
transaction whose ``valid_before`` column holds the permit's ``deadline``.

Every sandbox account counts as having approved Permit2 for its whole balance: there is
no ``approve`` on the sandbox chain, and a real payer makes that approval once per token.

A refusal raises :class:`~.chain.ChainError` whose ``reason`` is the code the official
x402 upto facilitator reports for the same revert.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from . import chain, permit2
from .chain import ChainError, Transaction
from .eip3009 import InvalidSignature
from .permit2 import PermitWitnessTransfer
from .token import SANDBOX_TOKEN

__all__ = [
    "PERMIT2_DEADLINE_EXPIRED",
    "PERMIT2_INSUFFICIENT_BALANCE",
    "PERMIT2_INVALID_SIGNATURE",
    "PERMIT2_INVALID_SPENDER",
    "PERMIT2_NONCE_USED",
    "PERMIT2_NOT_YET_VALID",
    "PERMIT2_TOKEN_MISMATCH",
    "UPTO_AMOUNT_EXCEEDS_PERMITTED",
    "UPTO_UNAUTHORIZED_FACILITATOR",
    "check_permit_witness_transfer",
    "permit_witness_transfer_from",
]

#: x402 ``upto`` EVM error codes (Permit2's and the upto proxy's, as the official ``x402``
#: facilitator names them).
PERMIT2_INVALID_SIGNATURE = "invalid_permit2_signature"
PERMIT2_INVALID_SPENDER = "invalid_permit2_spender"
PERMIT2_TOKEN_MISMATCH = "permit2_token_mismatch"  # noqa: S105 - an x402 error reason, not a secret
PERMIT2_NOT_YET_VALID = "permit2_not_yet_valid"
PERMIT2_DEADLINE_EXPIRED = "permit2_deadline_expired"
PERMIT2_NONCE_USED = "permit2_invalid_nonce"
PERMIT2_INSUFFICIENT_BALANCE = "permit2_insufficient_balance"
UPTO_AMOUNT_EXCEEDS_PERMITTED = "upto_amount_exceeds_permitted"
UPTO_UNAUTHORIZED_FACILITATOR = "upto_unauthorized_facilitator"


def check_permit_witness_transfer(
    conn: Connection,
    permit: PermitWitnessTransfer,
    signature: object,
    *,
    amount: int,
    sender: str,
    now: datetime,
) -> None:
    """Would :func:`permit_witness_transfer_from` succeed now?  Writes nothing."""
    _check_permit(conn, permit, signature, amount=amount, sender=sender, now=now)
    balance = chain.balance_of(conn, permit.from_address)
    if balance < amount:
        raise _insufficient(permit, amount, balance)


def permit_witness_transfer_from(
    conn: Connection,
    permit: PermitWitnessTransfer,
    signature: object,
    *,
    amount: int,
    sender: str,
    now: datetime,
) -> Transaction:
    """Settle an x402 ``upto`` authorization as its proxy does through Permit2: move
    ``amount`` (at most the permitted maximum) from ``from`` to ``witness.to`` and spend
    the Permit2 nonce, or raise :class:`ChainError` having written nothing.

    ``sender`` is the caller (``msg.sender``): only the facilitator the witness names may
    settle.  Every sandbox account counts as having approved Permit2 for the whole of its
    balance, so no allowance is asked for.  The nonce is stored under its owner in the
    nonces EIP-3009 uses (as 0x-hex, :attr:`PermitWitnessTransfer.nonce_key`): both are
    random 256-bit values, so the two namespaces, separate contracts on a real chain, do
    not meet unless a payer reuses one value on purpose.
    """
    _check_permit(conn, permit, signature, amount=amount, sender=sender, now=now)
    return chain.move_once(
        conn,
        kind=chain.PERMIT_WITNESS_TRANSFER,
        tx_hash=permit2.transaction_hash(permit),
        owner=permit.from_address,
        nonce=permit.nonce_key,
        to=permit.to,
        value=amount,
        now=now,
        window=(permit.valid_after, permit.deadline),
        reasons=(PERMIT2_NONCE_USED, PERMIT2_INSUFFICIENT_BALANCE),
    )


def _check_permit(
    conn: Connection,
    permit: PermitWitnessTransfer,
    signature: object,
    *,
    amount: int,
    sender: str,
    now: datetime,
) -> None:
    """The proxy's and Permit2's checks, in their order (the sandbox's one token and one
    proxy first): amount, caller, validAfter, deadline, nonce, signature."""
    if permit.spender.lower() != permit2.UPTO_PROXY_ADDRESS.lower():
        raise ChainError(
            PERMIT2_INVALID_SPENDER,
            f"spender is {permit.spender}, not x402's upto proxy {permit2.UPTO_PROXY_ADDRESS}",
        )
    if not SANDBOX_TOKEN.is_token(permit.token):
        raise ChainError(
            PERMIT2_TOKEN_MISMATCH,
            f"the sandbox chain has one token, USDC at {SANDBOX_TOKEN.address}; "
            f"{permit.token} does not exist there",
        )
    if not 0 <= amount <= permit.amount:
        raise ChainError(
            UPTO_AMOUNT_EXCEEDS_PERMITTED,
            f"amount {amount} is not within the permitted maximum {permit.amount}",
        )
    if sender.lower() != permit.facilitator.lower():
        raise ChainError(
            UPTO_UNAUTHORIZED_FACILITATOR,
            f"only the facilitator the witness names ({permit.facilitator}) may settle, "
            f"not {sender}",
        )
    moment = int(now.timestamp())
    if moment < permit.valid_after:
        raise ChainError(
            PERMIT2_NOT_YET_VALID,
            f"authorization is not yet valid: validAfter is {permit.valid_after}, now is {moment}",
        )
    if moment > permit.deadline:
        raise ChainError(
            PERMIT2_DEADLINE_EXPIRED,
            f"authorization is expired: deadline is {permit.deadline}, now is {moment}",
        )
    spent_by = chain.nonce_transaction(conn, permit.from_address, permit.nonce_key)
    if spent_by is not None:
        raise ChainError(
            PERMIT2_NONCE_USED,
            f"authorization is used: its nonce was spent by transaction {spent_by}",
        )
    try:
        signer = permit2.recover_signer(permit, signature)
    except InvalidSignature as exc:
        raise ChainError(PERMIT2_INVALID_SIGNATURE, f"invalid signature: {exc}") from None
    if signer != permit.from_address:
        raise ChainError(
            PERMIT2_INVALID_SIGNATURE,
            f"invalid signature: it recovers to {signer}, not to from {permit.from_address} "
            f"(signed for another chain, spender or set of parameters?)",
        )


def _insufficient(permit: PermitWitnessTransfer, amount: int, balance: int) -> ChainError:
    return ChainError(
        PERMIT2_INSUFFICIENT_BALANCE,
        f"transfer amount exceeds balance: {permit.from_address} holds {balance}, "
        f"the settlement moves {amount} (fund it with POST /sandbox/faucet)",
    )

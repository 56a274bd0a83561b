"""The money of a ``pay-url`` attempt: reserve it, then post or void it by what settled.

Three short transactions, never one held across the network:

1. :func:`reserve` -- claim the signed nonce on the attempt (unique), charge the wallet key
   under its policy and reserve the amount from its account to ``chain_payouts``; in
   ``test`` also mint the hot wallet exactly that amount on the sandbox chain.  A policy
   refusal rolls it back and records the failed attempt and ``payment.failed`` instead
   (:func:`record_refusal`, a transaction of its own), and pays nothing.
2. :func:`chain_verdict` (``test``) -- ask the sandbox chain whether the authorization
   settled, and how much it moved; if it did not, cancel it first (EIP-3009
   ``cancelAuthorization``, or Permit2's ``invalidateUnorderedNonces`` for an ``upto``
   authorization), so that it can never settle later.  If the cancel loses the race to a
   settle, it settled.  ``live`` has no such question to ask: the URL's settlement receipt
   is the only word.
3. :func:`conclude` -- post the reservation and write the receipt (settled), or void it,
   refund the charge and record ``payment.failed`` (not settled), or, in live when the URL
   did not confirm, leave the reservation pending (the reconciliation gap, docs/pay-url.md).

A metered (x402 ``upto``) payment reserves and charges the policy its signed maximum; when
it settles, only the amount that moved is posted and counted, and the rest of the hold and
of the charge is given back (:func:`_capture`).

Locks are taken in one order everywhere -- wallet key row, then ledger accounts, then the
sandbox chain's rows -- so concurrent attempts cannot deadlock on PostgreSQL.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select
from sqlalchemy.exc import IntegrityError

from svc.money import format_micros

from ...crypto import SecretBox
from ...ids import new_id
from ...sandbox import chain
from ...store import tables as t
from .. import approvals, ledger, wallets
from ..errors import DomainError, PaymentRefused
from ..events import record_event
from . import attempts
from .hot_wallet import HotWallet
from .offers import SignedPayment
from .unlocked import Unlocked

__all__ = [
    "NeedsApproval",
    "NonceTaken",
    "Reservation",
    "Verdict",
    "chain_verdict",
    "conclude",
    "record_payment_failed",
    "record_refusal",
    "reserve",
]


class Reservation(enum.Enum):
    RESERVED = "reserved"
    #: The policy (or the balance) refused: the attempt failed, nothing was reserved.
    REFUSED = "refused"
    #: Another attempt holds this nonce (two probes got one MPP challenge): probe again.
    NONCE_TAKEN = "nonce_taken"


class Verdict(enum.Enum):
    SETTLED = "settled"
    NOT_SETTLED = "not_settled"
    #: Live only: the URL did not confirm, and nothing here can tell.
    UNKNOWN = "unknown"


class NeedsApproval(Exception):
    """The policy lets the payment through only with a person's approval: nothing was
    reserved (raised out of :func:`reserve`'s transaction, which it rolls back); the
    flow asks for one (:func:`~..approvals.request`) in a transaction of its own."""


class NonceTaken(Exception):
    """Another attempt holds this nonce (two probes got one MPP challenge): probe again.
    Raised out of :func:`reserve`'s transaction, which it rolls back."""


def reserve(
    conn: Connection,
    *,
    attempt_id: str,
    wallet: HotWallet,
    signed: SignedPayment,
    now: datetime,
    approved: str | None = None,
    can_ask: bool = False,
) -> None:
    """Claim the nonce, charge the key and reserve the amount; the attempt is ``paying``.

    ``approved``: the id of the approval a person gave this request (its hold becomes
    this charge); else a payment over the policy's approval line raises
    :class:`NeedsApproval` (``can_ask``: the request has an ``Idempotency-Key`` to
    resume with) or, without a key, ``idempotency_key_required``.

    Raises :class:`NonceTaken`, or the refusal's :class:`DomainError` (record it with
    :func:`record_refusal` in a transaction of its own): either way the caller's
    transaction rolls back whole, which takes back everything written here.  That keeps
    the usual case free of savepoints: neither a taken nonce (claimed by the attempt's
    one update) nor the policy's refusal needs anything of this transaction kept.
    """
    row = attempts.get_to_reserve(conn, attempt_id)
    transfer_id = _charge_and_hold(conn, row, wallet, signed, now, approved, can_ask)
    try:
        attempts.update_attempt(
            conn,
            attempt_id,
            now,
            status="paying",
            payer=signed.payer,
            nonce=signed.nonce,
            rail=signed.rail,
            amount_micros=signed.amount,
            max_amount_micros=signed.amount if signed.metered else None,
            pay_to=signed.pay_to,
            network=signed.network,
            transfer_id=transfer_id,
            reserved_at=now,
        )
    except IntegrityError:
        raise NonceTaken() from None
    if wallet.sandbox:
        # Last: every test payment credits the one hot wallet's balance row, whose lock
        # is then held only until the commit that follows.
        chain.mint(conn, to=wallet.address, value=signed.amount, now=now)


def record_refusal(
    conn: Connection,
    *,
    attempt_id: str,
    signed: SignedPayment,
    refused: DomainError,
    request_id: str,
    now: datetime,
) -> None:
    """The attempt failed as :func:`reserve` was refused; nothing was reserved."""
    paid: dict[str, Any] = {
        "rail": signed.rail,
        "amount_micros": signed.amount,
        "max_amount_micros": signed.amount if signed.metered else None,
    }
    row = attempts.fail(conn, attempt_id, refused, now, payer=None, nonce=None, **paid)
    approvals.release_outpriced(conn, refused, now)
    if isinstance(refused, PaymentRefused):
        record_payment_failed(conn, row, refused, request_id, now)


def _charge_and_hold(
    conn: Connection,
    row: Row[Any],
    wallet: HotWallet,
    signed: SignedPayment,
    now: datetime,
    approved: str | None = None,
    can_ask: bool = False,
) -> str:
    """Charge the key's policy and reserve the amount; raise the refusal's DomainError."""
    env, amount = row.environment, signed.amount
    receipt_id = new_id("rcpt")
    if approved is not None:
        approvals.use(conn, approved, amount, receipt_id=receipt_id, now=now)
    key = wallets.charge(conn, row.wallet_key_id, amount, rail=signed.rail, host=row.host, now=now)
    if approved is None and wallets.PolicyValues.of(key).needs_approval(amount, row.host):
        if can_ask:
            raise NeedsApproval()
        raise DomainError(
            "idempotency_key_required",
            f"Paying {format_micros(amount)} to {row.host} needs a person's approval under "
            "this wallet key's policy: send an Idempotency-Key, so that the request can be "
            "repeated once approved.",
        )
    # The key's account and a shard of the payouts account, in one statement (as a sale
    # reads its accounts: payments.record_purchase).
    shard = ledger.platform_shard()
    debit, payouts = ledger.find_accounts(
        conn,
        environment=env,
        named=[(ledger.WALLET_KEY, key.id), (ledger.CHAIN_PAYOUTS, shard)],
        now=now,
    )
    try:
        transfer_id = ledger.reserve(
            conn,
            environment=env,
            debit=debit,
            credit=payouts,
            amount=amount,
            kind="pay_url",
            now=now,
            # The receipt this reservation becomes if it settles (the ledger audit matches
            # every receipt to the one transfer carrying its id).
            receipt_id=receipt_id,
            wallet_key_id=key.id,
            reference=row.id,
        )
    except ledger.InsufficientFunds:
        raise wallets.insufficient_funds(conn, key, amount) from None
    return transfer_id


#: The sandbox transactions that settle a pay-url authorization (EIP-3009, Permit2 upto).
_SETTLING = (chain.TRANSFER, chain.PERMIT_WITNESS_TRANSFER)


def chain_verdict(
    conn: Connection, *, payer: str, nonce: str, now: datetime
) -> tuple[Verdict, str | None, int | None]:
    """Test only: did the authorization settle on the sandbox chain, in which transaction
    and moving how much?  If not, it never will."""
    spent_by = chain.nonce_spent_by(conn, payer, nonce)
    if spent_by is None:
        try:
            chain.cancel_authorization(conn, payer, nonce, now=now)
            return Verdict.NOT_SETTLED, None, None
        except chain.ChainError:  # a settle spent the nonce while we looked
            spent_by = chain.nonce_spent_by(conn, payer, nonce)
    if spent_by is not None and spent_by[1] in _SETTLING:
        return Verdict.SETTLED, spent_by[0], spent_by[2]
    return Verdict.NOT_SETTLED, None, None


def conclude(
    conn: Connection,
    *,
    attempt_id: str,
    verdict: Verdict,
    tx_hash: str | None,
    answer: Unlocked | None,
    failure: DomainError,
    box: SecretBox,
    request_id: str,
    now: datetime,
    locked: Row[Any] | None = None,
    settled_amount: int | None = None,
) -> Row[Any] | None:
    """Post, void or hold the reservation, exactly once, and record the answer; the
    attempt's row as concluded (``None``: it was concluded already).

    ``failure`` is the error the attempt ends with when it did not settle.
    ``settled_amount``: what a metered payment moved (the chain's word in test, the URL's
    in live; ``None``: its maximum), never counted above the maximum.  ``locked``:
    the attempt's row (:func:`~.attempts.get_to_conclude`) when the caller has locked it
    and its wallet key already, having asked the sandbox chain for the ``verdict``
    (:func:`chain_verdict`).
    """
    row = locked
    if row is None:
        row = attempts.get_to_conclude(conn, attempt_id)  # and its wallet key, locked
    if row.status not in ("paying", "pending"):
        return None  # concluded already (a retry of a stale attempt raced this one)
    response = _response_columns(answer, box)
    if answer is None and row.status == "pending":  # decided later: keep what it answered
        response = {"response_status": row.response_status}
    # The sandbox chain's verdict names the transaction that spent this attempt's own
    # nonce (unique per attempt): no other receipt can count it, so only a live URL's
    # claim is checked.
    spent = _spent(row, settled_amount)
    if verdict is Verdict.SETTLED and spent == 0:
        verdict = Verdict.NOT_SETTLED  # a metered payment that used nothing moved nothing
    if (
        verdict is Verdict.SETTLED
        and tx_hash is not None
        and (locked is not None or not _tx_has_receipt(conn, row, tx_hash))
    ):
        receipt_id = _post(conn, row, tx_hash, request_id, now, spent)
        return attempts.update_and_get(
            conn,
            attempt_id,
            now,
            status="succeeded",
            tx_hash=tx_hash,
            receipt_id=receipt_id,
            amount_micros=spent,
            **response,
        )
    elif verdict is Verdict.NOT_SETTLED:
        ledger.void(conn, row.transfer_id, now)
        wallets.refund_charge(
            conn, row.wallet_key_id, row.amount_micros, charged_at=row.reserved_at
        )
        failed = attempts.fail(
            conn, attempt_id, failure, now, response_status=response["response_status"]
        )
        record_payment_failed(conn, failed, failure, request_id, now)
        return failed
    else:
        return attempts.fail(conn, attempt_id, failure, now, "pending", tx_hash=tx_hash, **response)


def _spent(row: Row[Any], settled_amount: int | None) -> int:
    """What the attempt spends if it settled: a fixed payment its amount; a metered one
    what moved, capped at the maximum it reserved (a URL's claim above it is not believed:
    the authorization cannot move more)."""
    reserved = int(row.amount_micros)
    if row.max_amount_micros is None or settled_amount is None:
        return reserved
    return max(0, min(settled_amount, reserved))


def _tx_has_receipt(conn: Connection, row: Row[Any], tx_hash: str) -> bool:
    """A transaction pays one receipt: a live URL naming one already counted is not proof.

    Only the payer's side counts: when the URL is a gate of this service, the same
    transaction is also the seller's receipt (kind ``resource``), booked by the gate.
    """
    r = t.receipts
    found = conn.execute(
        select(r.c.id).where(
            r.c.environment == row.environment, r.c.kind == "url", r.c.tx_hash == tx_hash
        )
    ).first()
    return found is not None


# Built once, parameters bound at execution (see attempts: no per-call rebuild).
_INSERT_RECEIPT = insert(t.receipts)


def _post(
    conn: Connection, row: Row[Any], tx_hash: str, request_id: str, now: datetime, spent: int
) -> str:
    """Post ``spent`` of the reservation and write the payer's receipt; its id (``row``:
    the attempt as :func:`~.attempts.get_to_conclude` reads it, with its transfer's
    accounts).  A metered payment that spent less than its maximum gives the rest of the
    wallet key's charge back: the allowance used is what moved."""
    ledger.lock_accounts(conn, [row.transfer_debit_account_id, row.transfer_credit_account_id])
    ledger.post(conn, row.transfer_id, now, amount=spent)
    if spent < row.amount_micros:
        wallets.refund_charge(
            conn, row.wallet_key_id, row.amount_micros - spent, charged_at=row.reserved_at
        )
    conn.execute(
        _INSERT_RECEIPT,
        {
            "id": row.transfer_receipt_id,
            "environment": row.environment,
            "kind": "url",
            "rail": row.rail,
            "settlement": "external",
            "amount_micros": spent,
            "max_amount_micros": row.max_amount_micros,
            "fee_micros": 0,
            "wallet_key_id": row.wallet_key_id,
            "transfer_id": row.transfer_id,
            "tx_hash": tx_hash,
            "payer": row.payer,
            "network": row.network,
            "metadata": {"attempt_id": row.id, "pay_to": row.pay_to},
            "request_id": request_id,
            "created_at": now,
        },
    )
    return str(row.transfer_receipt_id)


def _response_columns(answer: Unlocked | None, box: SecretBox) -> dict[str, Any]:
    if answer is None:
        return {"response_status": None}
    return {
        "response_status": answer.status,
        "response_headers": answer.headers,
        "response_body": box.seal(answer.body),
        "body_encoding": answer.encoding,
        "body_truncated": answer.truncated,
    }


def record_payment_failed(
    conn: Connection, row: Row[Any], error: DomainError, request_id: str, now: datetime
) -> None:
    """``payment.failed`` for the wallet key's owner: their agent's pay-url did not pay."""
    record_event(
        conn,
        owner_id=row.owner_id,
        environment=row.environment,
        type="payment.failed",
        data={
            "ok": False,
            "type": "url",
            "rail": row.rail,
            "reason": error.code,
            "message": error.message,
            "request_id": request_id,
            "attempt_id": row.id,
            "wallet_key_id": row.wallet_key_id,
            "host": row.host,
            "amount": None if row.amount_micros is None else format_micros(row.amount_micros),
            "environment": row.environment,
            "settlement": "external",
        },
        now=now,
    )

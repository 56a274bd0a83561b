"""An open-rail payment in the service's books: the receipt, the credit, the events.

Everything here runs inside one database transaction that the caller opened, so that a
payment's parts commit together or not at all:

* :func:`settle_on_sandbox` (``test``) moves the payer's sandbox USDC with the signed
  ``transferWithAuthorization`` *and* credits the seller in the same transaction: a
  refused transfer or a failed credit leaves neither behind;
* :func:`credit` books a settled transaction: for ``processor_deposit``, the amount from
  ``chain_deposits`` (tokens that reached the service's deposit address) to the seller's
  balance and the platform fee from there to ``platform_fees``, exactly as a ledger
  payment does; for ``direct_wallet`` (the tokens went to the seller's own wallet) no
  ledger transfer at all.  Then the receipt (keyed by the transaction hash, so a
  transaction is booked once) and ``payment.succeeded`` for the seller's owner;
* :func:`record_refusal` writes ``payment.failed`` for the seller's owner after a
  refused credential, once the attempt's own writes have rolled back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from svc.money import format_micros

from ...sandbox import chain
from ...sandbox.eip3009 import Authorization
from ...store import tables as t
from .. import ledger
from ..events import record_event
from ..payments import OnChain, book_sale
from ._terms import PROCESSOR_DEPOSIT, RailTerms

__all__ = [
    "credit",
    "mark_metered",
    "receipt_for_transaction",
    "record_refusal",
    "settle_on_sandbox",
]

_r = t.receipts


def receipt_for_transaction(conn: Connection, environment: str, tx_hash: str) -> str | None:
    """The seller's receipt a transaction was booked as, if it was (the payer's side of
    the same transaction, a ``pay-url`` receipt, is another row)."""
    return conn.execute(
        select(_r.c.id).where(
            _r.c.environment == environment,
            _r.c.kind == "resource",
            _r.c.tx_hash == tx_hash.lower(),
        )
    ).scalar()


def settle_on_sandbox(
    conn: Connection,
    *,
    resource: Any,
    seller: Any,
    terms: RailTerms,
    rail: str,
    payload: Mapping[str, Any],
    fee_bps: int,
    request_id: str,
    now: datetime,
    receipt_id: str | None = None,
) -> tuple[str, str]:
    """Run the authorization on the sandbox chain and book it: ``(receipt id, tx hash)``.

    ``payload`` is pympp's verified native authorization (``from``, ``to``, ``value``,
    ``validAfter``, ``validBefore``, ``nonce``, ``signature``).  Raises
    :class:`~reference_server.sandbox.chain.ChainError` when the token would revert
    (the nonce was used, the payer is short of funds...), having written nothing.
    """
    auth = Authorization.from_json(payload)
    tx = chain.transfer_with_authorization(conn, auth, payload.get("signature"), now=now)
    receipt_id = credit(
        conn,
        resource=resource,
        seller=seller,
        terms=terms,
        rail=rail,
        tx_hash=tx.hash,
        payer=tx.from_address,
        amount=tx.value,
        fee_bps=fee_bps,
        request_id=request_id,
        now=now,
        receipt_id=receipt_id,
    )
    return receipt_id, tx.hash


def credit(
    conn: Connection,
    *,
    resource: Any,
    seller: Any,
    terms: RailTerms,
    rail: str,
    tx_hash: str,
    payer: str | None,
    amount: int,
    fee_bps: int,
    request_id: str,
    now: datetime,
    receipt_id: str | None = None,
) -> str:
    """Book a settled transaction for ``resource``; returns the receipt id.  A transaction
    already booked is not booked again: its receipt id is returned."""
    env = resource.environment
    tx_hash = tx_hash.lower()
    existing = receipt_for_transaction(conn, env, tx_hash)
    if existing is not None:
        return existing
    deposits = None
    if terms.settlement == PROCESSOR_DEPOSIT:
        deposits = ledger.platform_account(
            conn, environment=env, kind=ledger.CHAIN_DEPOSITS, now=now
        )
    network = terms.asset.network
    return book_sale(
        conn,
        resource=resource,
        seller=seller,
        rail=rail,
        settlement=terms.settlement,
        amount=amount,
        debit=deposits,  # None (direct_wallet): the seller's own wallet has the tokens
        fee_bps=fee_bps,
        request_id=request_id,
        now=now,
        on_chain=OnChain(tx_hash=tx_hash, payer=payer, network=network),
        event_extra={"tx_hash": tx_hash, "payer": payer, "network": network},
        receipt_id=receipt_id,
    )


def mark_metered(
    conn: Connection, receipt_id: str, *, units: int | None, max_amount: int, now: datetime
) -> None:
    """Record on a metered sale's receipt, in its booking transaction, the units used
    (``None``: none reported, the maximum was taken) and the most the payer authorised."""
    conn.execute(
        update(_r)
        .where(_r.c.id == receipt_id)
        .values(status="settled", units=units, max_amount_micros=max_amount, settled_at=now)
    )


def record_refusal(
    conn: Connection,
    *,
    resource: Any,
    seller: Any,
    terms: RailTerms,
    rail: str,
    reason: str,
    message: str,
    payer: str | None,
    request_id: str,
    now: datetime,
    status: int | None = None,
) -> None:
    """``payment.failed`` for the seller's owner: a credential was presented at one of
    its gates and refused (replayed, unfunded, badly signed...)."""
    record_event(
        conn,
        owner_id=seller.owner_id,
        environment=resource.environment,
        type="payment.failed",
        data={
            **_about(resource, seller, rail, terms),
            "ok": False,
            "reason": reason,
            "message": message,
            "request_id": request_id,
            "attempt_id": None,
            "wallet_key_id": None,
            "amount": format_micros(int(resource.amount_micros)),
            "payer": payer,
            **({} if status is None else {"status": status}),
        },
        now=now,
    )


def _about(resource: Any, seller: Any, rail: str, terms: RailTerms) -> dict[str, Any]:
    """What both events say about the payment: what was paid for, how, where."""
    return {
        "type": "resource",
        "rail": rail,
        "resource_id": resource.id,
        "short_id": resource.short_id,
        "path_or_tool": resource.path if resource.kind == "http" else resource.tool,
        "seller_id": seller.id,
        "environment": resource.environment,
        "settlement": terms.settlement,
        "network": terms.asset.network,
    }

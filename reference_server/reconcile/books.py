"""The ledger's side of a reconciliation: every entry that names an on-chain transaction.

* deposits: the seller receipts settled ``processor_deposit`` and the owners' top-ups
  (tokens to the deposit address), which are what moves money out of ``chain_deposits``;
* the hot wallet: the ``pay-url`` receipts (``kind`` ``url``) with their attempt's payee,
  and the refunds sent on chain to a payer's address (``domain/refunds_chain.py``), which
  are what moves money into ``chain_payouts``;
* direct-wallet settlements: the seller receipts settled ``direct_wallet`` (tokens to the
  seller's own wallet; nothing in the ledger), with the seller's payout wallet.

Each account's balance is read too: money it moved that no such entry explains is drift.
"""

from __future__ import annotations

from typing import Any

import attrs
from sqlalchemy import Connection, func, select

from ..domain import ledger
from ..store import tables as t

__all__ = ["Books", "Entry", "read_books"]

_r = t.receipts
_a = t.spend_attempts
_u = t.top_ups
_f = t.refunds


@attrs.frozen(kw_only=True)
class Entry:
    """One ledger entry that names a transaction: who paid whom how much, by ``tx_hash``."""

    account: str
    tx_hash: str
    from_address: str | None
    to: str | None
    amount: int
    receipt_id: str


@attrs.frozen(kw_only=True)
class Books:
    deposits: tuple[Entry, ...]
    payouts: tuple[Entry, ...]
    direct: tuple[Entry, ...]
    #: What ``chain_deposits`` has let into the ledger (minus its balance: it is a source).
    deposits_total: int
    #: What ``chain_payouts`` holds: everything the hot wallet has paid for wallet keys.
    payouts_total: int
    #: ``(pay_to, amount)`` of pay-url attempts still unresolved (paying or pending), and
    #: of refunds on chain not sent yet.
    unresolved: tuple[tuple[str, int], ...]


def _lower(value: str | None) -> str | None:
    return None if value is None else value.lower()


def _entry(account: str, row: Any, to: str | None) -> Entry:
    """The entry of a row with its ``id``, ``tx_hash``, ``payer`` and ``amount_micros``."""
    return Entry(
        account=account,
        tx_hash=row.tx_hash.lower(),
        from_address=_lower(row.payer),
        to=_lower(to),
        amount=int(row.amount_micros),
        receipt_id=row.id,
    )


def _account_total(conn: Connection, environment: str, kind: str) -> int:
    acc = t.ledger_accounts
    total = conn.execute(
        select(func.coalesce(func.sum(acc.c.balance_micros), 0)).where(
            acc.c.environment == environment, acc.c.kind == kind
        )
    ).scalar()
    return int(total or 0)


def read_books(conn: Connection, environment: str, deposit_address: str | None) -> Books:
    """The environment's chain-facing entries and account totals, in one read."""
    from .findings import DEPOSITS, DIRECT_WALLET, HOT_WALLET

    seller_receipts = (
        select(
            _r.c.id, _r.c.tx_hash, _r.c.payer, _r.c.amount_micros, _r.c.settlement, _r.c.seller_id
        )
        .where(_r.c.environment == environment, _r.c.kind == "resource", _r.c.tx_hash.is_not(None))
        .order_by(_r.c.created_at, _r.c.id)
    )
    wallets = dict(
        conn.execute(
            select(t.sellers.c.id, t.sellers.c.payout_wallet_address).where(
                t.sellers.c.environment == environment
            )
        ).all()
    )
    deposits: list[Entry] = []
    direct: list[Entry] = []
    for row in conn.execute(seller_receipts):
        if row.settlement == "direct_wallet":
            direct.append(_entry(DIRECT_WALLET, row, wallets.get(row.seller_id)))
        else:
            deposits.append(_entry(DEPOSITS, row, deposit_address))
    top_ups = (
        select(_u.c.id, _u.c.tx_hash, _u.c.payer, _u.c.amount_micros)
        # Card top-ups are paid at the processor, not on chain.
        .where(_u.c.environment == environment, _u.c.rail != "card")
        .order_by(_u.c.created_at, _u.c.id)
    )
    deposits.extend(_entry(DEPOSITS, row, deposit_address) for row in conn.execute(top_ups))
    paid = (
        select(_r.c.id, _r.c.tx_hash, _r.c.amount_micros, _a.c.payer, _a.c.pay_to)
        .select_from(_r.join(_a, _a.c.receipt_id == _r.c.id))
        .where(_r.c.environment == environment, _r.c.kind == "url", _r.c.tx_hash.is_not(None))
        .order_by(_r.c.created_at, _r.c.id)
    )
    payouts = [_entry(HOT_WALLET, row, row.pay_to) for row in conn.execute(paid)]
    refunds = (
        select(_f.c.id, _f.c.tx_hash, _f.c.amount_micros, _f.c.status, _r.c.payer)
        .select_from(_f.join(_r, _r.c.id == _f.c.receipt_id))
        .where(_f.c.environment == environment, _f.c.status.in_(("succeeded", "pending")))
        .where(_r.c.settlement == "processor_deposit", _r.c.environment == environment)
        .order_by(_f.c.created_at, _f.c.id)
    )
    unresolved_refunds: list[tuple[str, int]] = []
    for sent in conn.execute(refunds):
        if sent.status == "succeeded" and sent.tx_hash:
            # From the hot wallet (whichever address it had): to the payer.
            payouts.append(
                Entry(
                    account=HOT_WALLET,
                    tx_hash=sent.tx_hash.lower(),
                    from_address=None,
                    to=_lower(sent.payer),
                    amount=int(sent.amount_micros),
                    receipt_id=sent.id,
                )
            )
        elif sent.payer:  # may be on its way
            unresolved_refunds.append((str(sent.payer).lower(), int(sent.amount_micros)))
    unresolved = tuple(
        (str(row.pay_to).lower(), int(row.amount_micros))
        for row in conn.execute(
            select(_a.c.pay_to, _a.c.amount_micros).where(
                _a.c.environment == environment,
                _a.c.status.in_(("paying", "pending")),
                _a.c.pay_to.is_not(None),
                _a.c.amount_micros.is_not(None),
            )
        )
    ) + tuple(unresolved_refunds)
    return Books(
        deposits=tuple(deposits),
        payouts=tuple(payouts),
        direct=tuple(direct),
        deposits_total=-_account_total(conn, environment, ledger.CHAIN_DEPOSITS),
        payouts_total=_account_total(conn, environment, ledger.CHAIN_PAYOUTS),
        unresolved=unresolved,
    )

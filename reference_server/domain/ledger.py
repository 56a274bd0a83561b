"""The double-entry ledger.

Every party that can hold money has one account per environment, named by ``kind`` and
``ref_id``.  Money moves only through *transfers* (debit one account, credit another,
same amount), each written in the transaction of the operation that caused it, so a
movement and its cause commit or vanish together.  Consequences the tests check:

* per environment, the balances of all accounts sum to zero at all times (sources such as
  sandbox funding go negative by exactly what entered the ledger);
* no account but a source ever goes below zero: the debit is a conditional ``UPDATE``
  (``balance - pending >= amount``), atomic on SQLite and PostgreSQL alike;
* a reservation is a *pending* transfer: it holds the amount in the debit account's
  ``pending_debit_micros`` and is later posted or voided, exactly once (a conditional
  status change from ``pending``).

Amounts are integer micro-units.  Callers that touch several accounts lock them first with
:func:`lock_accounts` (sorted, so concurrent operations cannot deadlock on PostgreSQL).

The platform accounts that every sale of an environment would otherwise touch
(``platform_fees``, ``chain_deposits``, ``chain_payouts``: :data:`SHARDED`) are split into
:data:`SHARDS` accounts each (``ref_id`` ``platform``, ``platform.1`` ...), one picked at
random per movement (:func:`platform_account`), so concurrent sales lock different rows
instead of queueing on one; their balance is the sum over the shards
(:func:`balance_micros` with ``ref_id=PLATFORM``).  Shards are ordinary accounts, so the
sum of balances, the audit and the transfers are untouched, and a database from before the
split keeps its one row as the first shard.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import (
    BigInteger,
    Connection,
    Row,
    Table,
    UpdateBase,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.exc import IntegrityError, NoResultFound

from svc.money import MAX_AMOUNT

from ..ids import new_id
from ..invariant import InvariantError
from ..store import tables as t
from ..store.rows import insert_rows, write_with_inserts

__all__ = [
    "CHAIN_DEPOSITS",
    "CHAIN_PAYOUTS",
    "ENVIRONMENTS",
    "MAX_AMOUNT",
    "OWNER_WALLET",
    "PLATFORM",
    "PLATFORM_FEES",
    "PLATFORM_SHARD_REFS",
    "PROCESSOR_CLEARING",
    "PROCESSOR_PAYOUTS",
    "SANDBOX_FUNDING",
    "SELLER_BALANCE",
    "SHARDED",
    "SHARDS",
    "WALLET_KEY",
    "Balance",
    "InsufficientFunds",
    "LedgerError",
    "account_id",
    "audit",
    "available_micros",
    "balance_columns",
    "balance_micros",
    "ensure_account",
    "find_accounts",
    "lock_accounts",
    "locked_balances",
    "locked_balances_after",
    "move_balances",
    "move_sale",
    "open_account",
    "platform_account",
    "platform_shard",
    "post",
    "record_sale",
    "reserve",
    "sale_transfer_rows",
    "sum_of_balances",
    "transfer",
    "void",
]

#: The two money environments; they never share money, keys, webhooks or events.
ENVIRONMENTS = ("test", "live")

SELLER_BALANCE = "seller_balance"
OWNER_WALLET = "owner_wallet"
WALLET_KEY = "wallet_key"
PLATFORM_FEES = "platform_fees"
#: Where test money comes from: instant sandbox funding.
SANDBOX_FUNDING = "sandbox_funding"
#: Where card money comes from: the card processor's clearing account (the buy page's
#: payments; the sandbox card processor's in ``test``).
PROCESSOR_CLEARING = "processor_clearing"
#: Where open-rail money comes from: tokens that arrived at the service's deposit address
#: (``processor_deposit`` settlement of an x402/MPP payment at a gate).
CHAIN_DEPOSITS = "chain_deposits"
#: Where ``pay-url`` money goes: tokens the service's hot wallet paid out on chain for a
#: wallet key (its balance is everything agents have paid to outside URLs).
CHAIN_PAYOUTS = "chain_payouts"
#: Where withdrawals go: money the payout processor sent to sellers' bank accounts (its
#: balance is everything paid out; a withdrawal holds its amount by a pending transfer
#: into it, posted when the payout is paid, voided when it failed).
PROCESSOR_PAYOUTS = "processor_payouts"
#: ``ref_id`` of the service's own accounts.
PLATFORM = "platform"
_SOURCES = frozenset({SANDBOX_FUNDING, PROCESSOR_CLEARING, CHAIN_DEPOSITS})
#: The platform accounts a sale, an open-rail sale or a pay-url moves money through: one
#: row each would serialise every such movement of an environment on its row lock.
SHARDED = frozenset({PLATFORM_FEES, CHAIN_DEPOSITS, CHAIN_PAYOUTS})
#: Accounts per sharded kind: enough that 32 concurrent sales rarely share one.
SHARDS = 16
#: ``ref_id`` of each shard; the first is the single account of databases from before.
PLATFORM_SHARD_REFS = (PLATFORM, *(f"{PLATFORM}.{n}" for n in range(1, SHARDS)))

_a = t.ledger_accounts
_t = t.ledger_transfers

# The statements every payment runs, built once with their parameters bound at execution:
# a statement built per call costs several times what executing it on SQLite does.
_ACCOUNT_ID = select(_a.c.id).where(
    _a.c.environment == bindparam("environment"),
    _a.c.kind == bindparam("kind"),
    _a.c.ref_id == bindparam("ref_id"),
)
_INSERT_TRANSFER = insert(_t)
_HOLD = (
    update(_a)
    .where(
        _a.c.id == bindparam("account"),
        _a.c.balance_micros - _a.c.pending_debit_micros >= bindparam("amount"),
    )
    .values(pending_debit_micros=_a.c.pending_debit_micros + bindparam("amount"))
)
_RELEASE = (
    update(_a)
    .where(_a.c.id == bindparam("account"))
    .values(pending_debit_micros=_a.c.pending_debit_micros - bindparam("amount"))
)
# The row as settled comes back with the update (one statement, not two).
_SETTLE = (
    update(_t)
    .where(_t.c.id == bindparam("transfer_id"), _t.c.status == "pending")
    .values(status=bindparam("new_status"), settled_at=bindparam("now"))
    .returning(*_t.c)
)
_CAPTURE = (
    update(_t).where(_t.c.id == bindparam("transfer_id")).values(amount_micros=bindparam("amount"))
)
_DEBIT = (
    update(_a)
    .where(
        _a.c.id == bindparam("account"),
        (_a.c.allow_negative == True)  # noqa: E712 - SQL expression
        | (_a.c.balance_micros - _a.c.pending_debit_micros >= bindparam("amount")),
    )
    .values(balance_micros=_a.c.balance_micros - bindparam("amount"))
)
_CREDIT = (
    update(_a)
    .where(_a.c.id == bindparam("account"))
    .values(balance_micros=_a.c.balance_micros + bindparam("amount"))
)
_CREDIT_RETURNING = _CREDIT.returning(_a.c.balance_micros)
#: What :func:`find_accounts` reads of each account: its id, and its balance for a
#: caller whose transaction holds what it read (:func:`reads_hold`).
_FOUND = (
    _a.c.id,
    _a.c.kind,
    _a.c.ref_id,
    _a.c.balance_micros,
    _a.c.pending_debit_micros,
    _a.c.allow_negative,
)


class LedgerError(Exception):
    """A ledger rule would be broken; nothing was written."""


class InsufficientFunds(LedgerError):
    def __init__(self, account: str, available: int, needed: int) -> None:
        super().__init__(f"account {account} has {available} micros available, needs {needed}")
        self.account = account
        self.available = available
        self.needed = needed


def open_account(
    conn: Connection, *, environment: str, kind: str, ref_id: str, now: datetime
) -> str:
    account = new_id("acct")
    conn.execute(
        insert(_a).values(
            id=account,
            environment=environment,
            kind=kind,
            ref_id=ref_id,
            balance_micros=0,
            pending_debit_micros=0,
            allow_negative=kind in _SOURCES,
            created_at=now,
        )
    )
    return account


def account_id(conn: Connection, *, environment: str, kind: str, ref_id: str) -> str | None:
    return conn.execute(
        _ACCOUNT_ID, {"environment": environment, "kind": kind, "ref_id": ref_id}
    ).scalar()


def ensure_account(
    conn: Connection, *, environment: str, kind: str, ref_id: str, now: datetime
) -> str:
    """The account, opened on first use (the platform's own accounts are made this way)."""
    existing = account_id(conn, environment=environment, kind=kind, ref_id=ref_id)
    if existing is not None:
        return existing
    try:
        with conn.begin_nested():
            return open_account(conn, environment=environment, kind=kind, ref_id=ref_id, now=now)
    except IntegrityError:  # opened concurrently by another transaction
        found = account_id(conn, environment=environment, kind=kind, ref_id=ref_id)
        if found is None:
            raise InvariantError("the account another transaction opened is not there") from None
        return found


def platform_shard() -> str:
    """The ``ref_id`` of one shard of a :data:`SHARDED` platform account, at random:
    concurrent movements through the platform rarely wait on the same row lock."""
    return random.choice(PLATFORM_SHARD_REFS)  # noqa: S311 - spreading load, not a secret


def platform_account(conn: Connection, *, environment: str, kind: str, now: datetime) -> str:
    """One shard of a :data:`SHARDED` platform account (opened on first use), at random
    (:func:`platform_shard`)."""
    if kind not in SHARDED:
        raise InvariantError(f"{kind} is not a sharded platform account")
    return ensure_account(
        conn, environment=environment, kind=kind, ref_id=platform_shard(), now=now
    )


def balance_micros(conn: Connection, *, environment: str, kind: str, ref_id: str) -> int:
    """An account's balance; a :data:`SHARDED` platform account's is its shards' sum."""
    refs = PLATFORM_SHARD_REFS if kind in SHARDED and ref_id == PLATFORM else (ref_id,)
    value = conn.execute(
        select(func.coalesce(func.sum(_a.c.balance_micros), 0)).where(
            _a.c.environment == environment, _a.c.kind == kind, _a.c.ref_id.in_(refs)
        )
    ).scalar()
    return int(value or 0)


def available_micros(conn: Connection, account: str) -> int:
    row = conn.execute(
        select(_a.c.balance_micros, _a.c.pending_debit_micros).where(_a.c.id == account)
    ).one()
    return int(row.balance_micros - row.pending_debit_micros)


def lock_accounts(conn: Connection, accounts: Iterable[str]) -> None:
    """Row-lock accounts in id order (PostgreSQL); SQLite's write lock already serialises.

    ``FOR NO KEY UPDATE``, the lock an ``UPDATE`` of a balance takes anyway: it does not
    block the key-share lock that inserting a transfer (a foreign key to the account)
    takes, so other transactions recording their transfers do not wait on it."""
    if conn.dialect.name != "postgresql":
        return
    ids = sorted(set(accounts))
    conn.execute(
        select(_a.c.id).where(_a.c.id.in_(ids)).order_by(_a.c.id).with_for_update(key_share=True)
    )


def find_accounts(
    conn: Connection,
    *,
    environment: str,
    named: list[tuple[str, str]],
    now: datetime,
    balances: dict[str, Balance] | None = None,
) -> list[str]:
    """The ids of the ``named`` accounts (kind, ref_id), in one statement; an account not
    there yet is opened (:func:`ensure_account`).  With ``balances`` (where
    :func:`reads_hold`), their balances too, as :func:`locked_balances` reads them: one
    statement fewer than reading them again."""
    if len(named) <= _NAMED_BUILT:  # a sale's two, a group of sales' few: built once per count
        params = {"environment": environment}
        for n, (kind, ref_id) in enumerate(named):
            params[f"k{n}"], params[f"r{n}"] = kind, ref_id
        rows = conn.execute(_named_accounts(len(named)), params)
    else:
        wanted = or_(*(and_(_a.c.kind == k, _a.c.ref_id == r) for k, r in named))
        rows = conn.execute(select(*_FOUND).where(_a.c.environment == environment, wanted))
    found = {}
    for row in rows:
        found[row.kind, row.ref_id] = row.id
        if balances is not None:
            balances[row.id] = Balance.read(row)
    for kind, ref_id in named:
        if (kind, ref_id) not in found:  # first use
            found[kind, ref_id] = ensure_account(
                conn, environment=environment, kind=kind, ref_id=ref_id, now=now
            )
            if balances is not None:
                balances.clear()  # rare: the caller reads them all again
    return [found[name] for name in named]


def reads_hold(conn: Connection) -> bool:
    """Whether what ``conn``'s transaction reads stays true until it commits, locked or
    not: on SQLite a write transaction holds the database's write lock from its
    ``BEGIN IMMEDIATE``; on PostgreSQL only the rows it locked hold."""
    return conn.dialect.name == "sqlite"


_BALANCES = (
    select(_a.c.id, _a.c.balance_micros, _a.c.pending_debit_micros, _a.c.allow_negative)
    .where(_a.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(_a.c.id)
)
_LOCKED_BALANCES = _BALANCES.with_for_update(key_share=True)

#: Up to how many named accounts :func:`find_accounts` reads with a statement built once.
_NAMED_BUILT = 8


@functools.cache
def _named_accounts(count: int) -> Any:
    return select(*_FOUND).where(
        _a.c.environment == bindparam("environment"),
        or_(
            *(
                and_(_a.c.kind == bindparam(f"k{n}"), _a.c.ref_id == bindparam(f"r{n}"))
                for n in range(count)
            )
        ),
    )


@functools.cache
def _move_statement(count: int) -> Any:
    """:func:`move_balances`' one ``UPDATE`` of ``count`` accounts: each balance plus
    its delta, where no account that may not go negative would."""
    delta = case(
        *(
            (_a.c.id == bindparam(f"account_{n}"), bindparam(f"delta_{n}", type_=BigInteger))
            for n in range(count)
        ),
        else_=literal(0, BigInteger),
    )
    return (
        update(_a)
        .where(
            _a.c.id.in_([bindparam(f"account_{n}") for n in range(count)]),
            (_a.c.allow_negative == True)  # noqa: E712 - SQL expression
            | (_a.c.balance_micros - _a.c.pending_debit_micros + delta >= 0),
        )
        .values(balance_micros=_a.c.balance_micros + delta)
    )


def record_sale(conn: Connection, rows: list[dict[str, Any]]) -> str:
    """A sale's posted transfers (:func:`sale_transfer_rows`), in one ``INSERT``; returns
    the payment's id.  The balances move by :func:`move_sale` in the same transaction:
    written first, the rows need no lock, so the locks that :func:`move_sale` takes are
    held for as short a time as possible."""
    conn.execute(insert(_t), rows)
    return str(rows[0]["id"])


def sale_transfer_rows(
    *,
    environment: str,
    debit: str,
    seller: str,
    fees: str,
    amount: int,
    fee: int,
    now: datetime,
    payment_refs: dict[str, Any],
    fee_refs: dict[str, Any],
) -> list[dict[str, Any]]:
    """A sale's two transfers, the payment's first: ``amount`` from ``debit`` to ``seller``
    (``payment``) and ``fee`` from ``seller`` to ``fees`` (``platform_fee``, none when 0);
    for :func:`record_sale`, or a caller that inserts several sales' at once."""
    _check(amount, debit, seller)
    if fee < 0 or fee > amount or (fee and seller == fees):
        raise LedgerError(f"a fee of {fee} micros cannot be taken from a sale of {amount}")
    rows = [_transfer_row(environment, debit, seller, amount, "payment", now, payment_refs)]
    if fee:
        rows.append(_transfer_row(environment, seller, fees, fee, "platform_fee", now, fee_refs))
    return rows


@attrs.frozen
class Balance:
    """An account's balance and reservations, as read under its row lock."""

    balance: int
    pending: int
    allow_negative: bool

    @property
    def available(self) -> int:
        return self.balance - self.pending

    @classmethod
    def read(cls, row: Any, prefix: str = "") -> Balance:
        """From a row with an account's three columns, named as in ``ledger_accounts``
        or, where one row carries several accounts, after ``prefix``
        (:func:`balance_columns`)."""
        return cls(
            int(getattr(row, f"{prefix}balance_micros")),
            int(getattr(row, f"{prefix}pending_debit_micros")),
            bool(getattr(row, f"{prefix}allow_negative")),
        )


def balance_columns(accounts: Any, prefix: str) -> tuple[Any, ...]:
    """An account's id and the three columns :meth:`Balance.read` reads, labelled after
    ``prefix``, for a read that joins ``accounts`` (an alias of ``ledger_accounts``) to
    something else."""
    return tuple(
        column.label(f"{prefix}{column.name}")
        for column in (
            accounts.c.id,
            accounts.c.balance_micros,
            accounts.c.pending_debit_micros,
            accounts.c.allow_negative,
        )
    )


def locked_balances(conn: Connection, accounts: Iterable[str]) -> dict[str, Balance]:
    """The accounts' balances, row-locked in id order as :func:`lock_accounts` locks
    them (PostgreSQL; SQLite's write lock already serialises): what they read stays true
    until the commit, so moves decided from them in Python (:func:`move_balances`) are
    exact."""
    query = _LOCKED_BALANCES if conn.dialect.name == "postgresql" else _BALANCES
    rows = conn.execute(query, {"ids": sorted(set(accounts))})
    return {row.id: Balance.read(row) for row in rows}


def locked_balances_after(
    conn: Connection, first: tuple[UpdateBase, dict[str, Any]], accounts: Iterable[str]
) -> tuple[Row[Any], dict[str, Balance]]:
    """``first`` (a statement and its parameters: an ``UPDATE ... RETURNING`` of one row,
    whose lock must come before the accounts': the payer's wallet key) and then
    :func:`locked_balances`; its row and the balances.

    On PostgreSQL in one round trip: the ``UPDATE`` is a ``WITH`` query joined to the
    accounts, so its row is locked before any account is (the accounts are locked, in
    id order, as the joined rows come out), and each row answered carries the
    ``UPDATE``'s columns beside the account's."""
    statement, params = first
    if conn.dialect.name != "postgresql":
        return conn.execute(statement, params).one(), locked_balances(conn, accounts)
    rows = conn.execute(_after(statement), {**params, "ids": sorted(set(accounts))}).all()
    if not rows:  # as ``first`` alone would (``.one()``): its row is not there
        raise NoResultFound("the row updated first is not there")
    balances = {row.account_id: Balance.read(row, "account_") for row in rows}
    return rows[0], balances


@functools.cache
def _after(statement: UpdateBase) -> Any:
    first = statement.cte("first")
    return (
        select(
            first,
            *balance_columns(_a, "account_"),
        )
        .select_from(first)
        .join(_a, true())
        .where(_a.c.id.in_(bindparam("ids", expanding=True)))
        .order_by(_a.c.id)
        .with_for_update(of=_a, key_share=True)
    )


def move_balances(
    conn: Connection,
    moves: dict[str, int],
    *,
    along: Sequence[tuple[Table, list[dict[str, Any]]]] = (),
) -> None:
    """Add each ``moves`` amount to its account's balance, in one statement; a negative
    move is a debit, refused (:class:`InsufficientFunds`) where it would overdraw, as
    :func:`transfer`'s is.  The caller decided the moves under :func:`locked_balances`'s
    locks, so a refusal here means it decided wrong; the other accounts may have moved
    by then (and ``along`` been written), so its transaction must roll back.

    ``along``: rows to insert with the moves (a sale's transfers, receipt, event), in the
    same statement where the database allows it (``rows.write_with_inserts``)."""
    moving = sorted(account for account, amount in moves.items() if amount)
    if not moving:
        for table, rows in along:
            insert_rows(conn, table, rows)
        return
    params: dict[str, Any] = {}
    for n, account in enumerate(moving):
        params[f"account_{n}"], params[f"delta_{n}"] = account, moves[account]
    updated = write_with_inserts(conn, _move_statement(len(moving)), params, along)
    if updated != len(moving):
        short = [a for a in moving if moves[a] < 0]
        if not short:
            raise LedgerError(f"not every account of {moving} is there")
        raise InsufficientFunds(short[0], available_micros(conn, short[0]), -moves[short[0]])


def move_sale(
    conn: Connection, *, debit: str, seller: str, fees: str, amount: int, fee: int
) -> int:
    """The balances of a sale :func:`record_sale` wrote: ``debit`` down by ``amount`` (or
    :class:`InsufficientFunds`), the seller up by ``amount - fee`` (each balance written
    once), the fee shard up by ``fee``.  Returns the seller's balance after.

    The updates run in account id order: each takes its row's lock, so they lock in
    the order :func:`lock_accounts` does (no deadlock with it) without a statement of
    their own, the locks taken at the last moment before the commit."""
    balance: int | None = None
    moves = {debit: -amount, seller: amount - fee}
    if fee:
        moves[fees] = fee
    for account in sorted(moves):
        if account == debit:
            _debit(conn, debit, amount)
        elif account == seller:
            balance = conn.execute(
                _CREDIT_RETURNING, {"account": seller, "amount": moves[seller]}
            ).scalar()
            if balance is None:
                raise LedgerError(f"no account {seller}")
        else:
            _credit(conn, fees, fee)
    if balance is None:
        raise InvariantError("a sale credits its seller")
    return int(balance)


def _transfer_row(
    environment: str,
    debit: str,
    credit: str,
    amount: int,
    kind: str,
    now: datetime,
    refs: dict[str, Any],
    status: str = "posted",
) -> dict[str, Any]:
    """A transfer's row, every column named (one ``INSERT`` takes several; a reference
    not in the table is refused by it): posted now, or ``pending`` until settled."""
    return {
        "id": new_id("tr"),
        "environment": environment,
        "debit_account_id": debit,
        "credit_account_id": credit,
        "amount_micros": amount,
        "kind": kind,
        "status": status,
        "created_at": now,
        "settled_at": now if status == "posted" else None,
        "receipt_id": None,
        "wallet_key_id": None,
        "reference": None,
        **refs,
    }


def _debit(conn: Connection, account: str, amount: int) -> None:
    result = conn.execute(_DEBIT, {"account": account, "amount": amount})
    if result.rowcount != 1:
        raise InsufficientFunds(account, available_micros(conn, account), amount)


def _credit(conn: Connection, account: str, amount: int) -> None:
    result = conn.execute(_CREDIT, {"account": account, "amount": amount})
    if result.rowcount != 1:
        raise LedgerError(f"no account {account}")


def _check(amount: int, debit: str, credit: str) -> None:
    if not isinstance(amount, int) or amount <= 0:
        raise LedgerError(f"transfer amount must be a positive number of micros, not {amount!r}")
    if debit == credit:
        raise LedgerError("a transfer needs two different accounts")


def _record(conn: Connection, row: dict[str, Any]) -> str:
    conn.execute(_INSERT_TRANSFER, row)
    return str(row["id"])


def transfer(
    conn: Connection,
    *,
    environment: str,
    debit: str,
    credit: str,
    amount: int,
    kind: str,
    now: datetime,
    **refs: Any,
) -> str:
    """Move ``amount`` micros now; raises :class:`InsufficientFunds` and writes nothing."""
    _check(amount, debit, credit)
    _debit(conn, debit, amount)
    _credit(conn, credit, amount)
    return _record(conn, _transfer_row(environment, debit, credit, amount, kind, now, refs))


def reserve(
    conn: Connection,
    *,
    environment: str,
    debit: str,
    credit: str,
    amount: int,
    kind: str,
    now: datetime,
    **refs: Any,
) -> str:
    """Hold ``amount`` in ``debit`` as a pending transfer, to be posted or voided later."""
    _check(amount, debit, credit)
    held = conn.execute(_HOLD, {"account": debit, "amount": amount})
    if held.rowcount != 1:
        raise InsufficientFunds(debit, available_micros(conn, debit), amount)
    row = _transfer_row(environment, debit, credit, amount, kind, now, refs, "pending")
    return _record(conn, row)


def _settle(conn: Connection, transfer_id: str, status: str, now: datetime) -> Any:
    row = conn.execute(
        _SETTLE, {"transfer_id": transfer_id, "new_status": status, "now": now}
    ).first()
    if row is None:
        raise LedgerError(f"transfer {transfer_id} is not pending (already posted or voided)")
    conn.execute(_RELEASE, {"account": row.debit_account_id, "amount": row.amount_micros})
    return row


def post(conn: Connection, transfer_id: str, now: datetime, *, amount: int | None = None) -> None:
    """Complete a reservation: the held money moves.  A second post raises.

    ``amount``: capture only that much of the hold (a metered payment's actual amount,
    more than zero and at most what was held); the rest is released, and the transfer
    records what moved.
    """
    row = _settle(conn, transfer_id, "posted", now)
    moved = row.amount_micros if amount is None else amount
    if moved != row.amount_micros:
        if not 0 < moved < row.amount_micros:
            raise LedgerError(f"cannot capture {moved} of a hold of {row.amount_micros}")
        conn.execute(_CAPTURE, {"transfer_id": transfer_id, "amount": moved})
    _debit(conn, row.debit_account_id, moved)
    _credit(conn, row.credit_account_id, moved)


def void(conn: Connection, transfer_id: str, now: datetime) -> None:
    """Cancel a reservation: the held money is available again.  A second void raises."""
    _settle(conn, transfer_id, "voided", now)


def sum_of_balances(conn: Connection, environment: str) -> int:
    """Zero, always: money enters only from a source account, which goes negative."""
    total = conn.execute(
        select(func.coalesce(func.sum(_a.c.balance_micros), 0)).where(
            _a.c.environment == environment
        )
    ).scalar_one()
    return int(total)


def audit(conn: Connection, environment: str) -> list[str]:
    """Every way the ledger could be wrong, checked from the rows; ``[]`` when sound.

    * balances sum to zero;
    * each balance equals its posted credits minus posted debits;
    * each ``pending_debit_micros`` equals the account's pending transfers;
    * no account that may not go negative is negative (or over-reserved);
    * every receipt names exactly one posted transfer of its amount that carries its id,
      but an open-rail payment settled ``direct_wallet``: its money went on chain to the
      seller, past the ledger, so it names no transfer and must carry its transaction
      hash and no fee;
    * a metered authorization names its pending hold of the maximum, a released one
      that hold voided;
    * a refunded receipt's ``refunded_micros`` is at most its amount and equals its
      ``refund`` and ``refund_fee`` transfers, posted or pending (a card refund the
      processor has not confirmed yet, a refund on chain not sent yet).
    """
    problems: list[str] = []
    total = sum_of_balances(conn, environment)
    if total != 0:
        problems.append(f"{environment}: balances sum to {total}, not 0")
    problems += _account_problems(conn, environment)
    r = t.receipts
    for receipt in conn.execute(select(r).where(r.c.environment == environment)):
        problem = _receipt_problem(conn, receipt)
        if problem is not None:
            problems.append(f"receipt {receipt.id} {problem}")
    return problems


def _account_problems(conn: Connection, environment: str) -> list[str]:
    """Each account's balance and pending reservations, against its transfers."""
    problems: list[str] = []

    def sums(account: Any, status: str) -> dict[str, int]:
        query = (
            select(account, func.sum(_t.c.amount_micros))
            .where(_t.c.status == status, _t.c.environment == environment)
            .group_by(account)
        )
        return {acct: int(n) for acct, n in conn.execute(query)}

    credit_by = sums(_t.c.credit_account_id, "posted")
    debit_by = sums(_t.c.debit_account_id, "posted")
    pending_by = sums(_t.c.debit_account_id, "pending")
    for acct in conn.execute(select(_a).where(_a.c.environment == environment)):
        expected = credit_by.get(acct.id, 0) - debit_by.get(acct.id, 0)
        if acct.balance_micros != expected:
            problems.append(f"{acct.id}: balance {acct.balance_micros}, transfers say {expected}")
        if acct.pending_debit_micros != pending_by.get(acct.id, 0):
            problems.append(
                f"{acct.id}: pending {acct.pending_debit_micros}, "
                f"transfers say {pending_by.get(acct.id, 0)}"
            )
        if not acct.allow_negative and acct.balance_micros - acct.pending_debit_micros < 0:
            problems.append(f"{acct.id} ({acct.kind}) is below zero")
    return problems


def _receipt_problem(conn: Connection, receipt: Row[Any]) -> str | None:
    """What is wrong with one receipt (completing "receipt <id> ..."), or ``None``."""
    refunded = _refund_problem(conn, receipt)
    if refunded is not None:
        return refunded
    if receipt.transfer_id is None:
        if receipt.settlement != "direct_wallet" or not receipt.tx_hash:
            return "names no transfer and is not on chain"
        if receipt.fee_micros != 0:
            return "took a fee from money it never held"
        if conn.execute(select(_t.c.id).where(_t.c.receipt_id == receipt.id)).first():
            return "is direct_wallet but moved ledger money"
        return None
    matches = conn.execute(
        select(_t).where(_t.c.id == receipt.transfer_id, _t.c.receipt_id == receipt.id)
    ).all()
    # A metered authorization names its hold (of the maximum): pending while authorized,
    # voided once released; a captured one names the sale it became.
    status = _TRANSFER_OF_RECEIPT.get(receipt.status, "posted")
    amount = receipt.amount_micros if status == "posted" else receipt.max_amount_micros
    if len(matches) != 1 or matches[0].amount_micros != amount:
        return "does not match one transfer of its amount"
    if matches[0].status != status:
        return f"names a {matches[0].status} transfer"
    return None


def _refund_problem(conn: Connection, receipt: Row[Any]) -> str | None:
    """A receipt refunded past its amount, or not as its refund transfers say."""
    refunded = int(receipt.refunded_micros)
    if refunded > receipt.amount_micros:
        return f"refunded {refunded}, more than its {receipt.amount_micros}"
    moved = conn.execute(
        select(func.coalesce(func.sum(_t.c.amount_micros), 0)).where(
            _t.c.receipt_id == receipt.id,
            _t.c.kind.in_(("refund", "refund_fee")),
            # pending: a card refund the processor has not confirmed, one on chain not sent
            _t.c.status.in_(("posted", "pending")),
        )
    ).scalar_one()
    if int(moved) != refunded:
        return f"refunded {refunded}, its refund transfers say {moved}"
    return None


#: The status of the transfer a receipt names, by the receipt's status.
_TRANSFER_OF_RECEIPT = {"settled": "posted", "authorized": "pending", "released": "voided"}

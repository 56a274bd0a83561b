"""Wallet keys: an agent's spend credential, with a prepaid ledger balance and a policy.

Policy: ``allowance`` per ``period`` (day, week, month, or none = never resets),
``max_per_tx``, a lifetime ``budget``, and optional ``allowed_hosts`` / ``allowed_rails``.
Spend counters live on the key's row.  Every spend first takes the key's row lock
(``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's write lock does the same), then checks the
policy, moves the money and bumps the counters, all in one transaction: two concurrent
payments can never both fit under a limit that only one fits under, in one process or many.

Periods roll lazily: the first use of a key after a period boundary resets the counter and
records ``allowance.reset`` (in the same transaction), so time can be injected in tests.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, Row, bindparam, insert, select, update

from svc import SpendBalance, WalletKey, WalletPolicy
from svc.money import format_micros, from_micros

from ..ids import hash_key, new_id, new_key
from ..invariant import InvariantError
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger
from .errors import DomainError, PaymentRefused
from .events import record_event
from .owners import find_owned_row

__all__ = [
    "PERIODS",
    "RAILS",
    "PolicyValues",
    "charge",
    "check_host",
    "count_spend",
    "counting_spend",
    "create_wallet_key",
    "get_wallet_key",
    "insufficient_available",
    "lock_wallet_key",
    "period_bounds",
    "period_is_current",
    "refund_charge",
    "spend_balance_model",
    "wallet_account",
    "wallet_key_model",
    "would_refuse",
]

PERIODS = ("day", "week", "month", "none")
RAILS = ("x402", "mpp", "rill")
#: An approval's lifetime when the policy names none, and the bounds of one it names.
DEFAULT_APPROVAL_TTL = 900
APPROVAL_TTL_BOUNDS = (60, 86400)
_w = t.wallet_keys


@attrs.frozen(kw_only=True)
class PolicyValues:
    """A policy in micro-units, as stored."""

    allowance: int | None = None
    max_per_tx: int | None = None
    budget: int | None = None
    period: str = "none"
    allowed_hosts: list[str] | None = None
    allowed_rails: list[str] | None = None
    #: A payment strictly above this, or to one of ``approval_hosts``, waits for a
    #: person (docs/approvals.md); ``approval_ttl_seconds``: how long it may wait.
    approval_above: int | None = None
    approval_hosts: list[str] | None = None
    approval_ttl_seconds: int | None = None

    @classmethod
    def of(cls, row: Row[Any]) -> PolicyValues:
        return cls(**{name: getattr(row, _column(name)) for name in attrs.fields_dict(cls)})

    def columns(self) -> dict[str, Any]:
        return {_column(name): value for name, value in attrs.asdict(self).items()}

    def model(self) -> WalletPolicy:
        def money(v: int | None) -> Any:
            return None if v is None else from_micros(v)

        return WalletPolicy(
            allowance=money(self.allowance),
            max_per_tx=money(self.max_per_tx),
            budget=money(self.budget),
            period=self.period,
            allowed_hosts=self.allowed_hosts,
            allowed_rails=self.allowed_rails,
            approval_above=money(self.approval_above),
            approval_hosts=self.approval_hosts,
            approval_ttl_seconds=self.ttl_seconds(),
        )

    def ttl_seconds(self) -> int:
        """How long an approval of this key waits for a person (and then for the agent)."""
        return (
            DEFAULT_APPROVAL_TTL if self.approval_ttl_seconds is None else self.approval_ttl_seconds
        )

    def asks_approval(self) -> bool:
        """Some payment of this key may wait for a person."""
        return self.approval_above is not None or bool(self.approval_hosts)

    def needs_approval(self, amount: int, host: str | None) -> bool:
        """A payment of ``amount`` to ``host`` must wait for a person."""
        above = self.approval_above is not None and amount > self.approval_above
        return above or (host is not None and host in (self.approval_hosts or ()))


def _column(field: str) -> str:
    """A :class:`PolicyValues` field's column: the amounts are in micro-units."""
    amounts = ("allowance", "max_per_tx", "budget", "approval_above")
    return f"{field}_micros" if field in amounts else field


# --- periods ------------------------------------------------------------------------------


def _add_months(moment: datetime, months: int) -> datetime:
    month_index = moment.month - 1 + months
    year, month = moment.year + month_index // 12, month_index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def period_bounds(period: str, anchor: datetime, now: datetime) -> tuple[datetime, datetime | None]:
    """The period containing ``now`` as ``(start, next_reset)``, counted from ``anchor``
    (the key's creation), so months keep their day: a key minted on 31 January resets on
    28 February, then 31 March."""
    if period in ("day", "week"):
        length = timedelta(days=1 if period == "day" else 7)
        start = anchor + length * max((now - anchor) // length, 0)
        return start, start + length
    if period == "month":
        months = (now.year - anchor.year) * 12 + (now.month - anchor.month)
        if _add_months(anchor, months) > now:
            months -= 1
        months = max(months, 0)
        return _add_months(anchor, months), _add_months(anchor, months + 1)
    return anchor, None


# --- rows ---------------------------------------------------------------------------------


def create_wallet_key(
    conn: Connection,
    *,
    owner_id: str,
    environment: str,
    name: str | None,
    policy: PolicyValues,
    now: datetime,
) -> tuple[Row[Any], str]:
    key_id = new_id("vw")
    key = new_key("vw", environment)
    conn.execute(
        insert(_w).values(
            id=key_id,
            owner_id=owner_id,
            environment=environment,
            name=name,
            key_hash=hash_key(key),
            key_prefix=key[:16],
            status="active",
            period_started_at=now,
            spent_period_micros=0,
            spent_total_micros=0,
            created_at=now,
            **policy.columns(),
        )
    )
    ledger.open_account(
        conn, environment=environment, kind=ledger.WALLET_KEY, ref_id=key_id, now=now
    )
    return get_wallet_key(conn, key_id), key


# Built once (parameters bound at execution): every payment reads a key this way.
_GET_KEY = select(_w).where(_w.c.id == bindparam("key_id"))
_LOCK_KEY = _GET_KEY.with_for_update()


def get_wallet_key(conn: Connection, key_id: str) -> Row[Any]:
    return conn.execute(_GET_KEY, {"key_id": key_id}).one()


def find_owned(conn: Connection, key_id: str, *, owner_id: str, environment: str) -> Row[Any]:
    return find_owned_row(
        conn, _w, key_id, owner_id=owner_id, environment=environment, what="wallet key"
    )


def lock_wallet_key(conn: Connection, key_id: str) -> Row[Any]:
    """Take the key's row lock: every spend, fund and refund of a key runs one at a time."""
    query = _LOCK_KEY if conn.dialect.name == "postgresql" else _GET_KEY
    return conn.execute(query, {"key_id": key_id}).one()


def wallet_account(conn: Connection, row: Row[Any]) -> str:
    account = ledger.account_id(
        conn, environment=row.environment, kind=ledger.WALLET_KEY, ref_id=row.id
    )
    if account is None:
        raise InvariantError("every wallet key has an account")
    return account


def roll_period(conn: Connection, row: Row[Any], now: datetime) -> Row[Any]:
    """Reset the period counter if a boundary has passed; record ``allowance.reset``."""
    current, nxt = period_bounds(row.period, as_utc(row.created_at), now)
    if current <= as_utc(row.period_started_at):
        return row
    conn.execute(
        update(_w).where(_w.c.id == row.id).values(period_started_at=current, spent_period_micros=0)
    )
    record_event(
        conn,
        owner_id=row.owner_id,
        environment=row.environment,
        type="allowance.reset",
        data={
            "wallet_key_id": row.id,
            "period": row.period,
            "allowance": None
            if row.allowance_micros is None
            else format_micros(row.allowance_micros),
            "spent_last_period": format_micros(row.spent_period_micros),
            "period_started_at": current.isoformat(),
            "next_reset_at": None if nxt is None else nxt.isoformat(),
        },
        now=now,
    )
    return get_wallet_key(conn, row.id)


# --- spending -----------------------------------------------------------------------------


def period_is_current(row: Row[Any], now: datetime) -> bool:
    """The key's counters count the period ``now`` is in (no reset due)."""
    current, _ = period_bounds(row.period, as_utc(row.created_at), now)
    return current <= as_utc(row.period_started_at)


def check_host(row: Row[Any], host: str) -> None:
    """Raise ``host_not_allowed`` unless the policy lets the key pay ``host`` (``pay-url``
    asks before it sends anything to the host, and again with the rest of the policy)."""
    allowed = PolicyValues.of(row).allowed_hosts
    if allowed is not None and host not in allowed:
        raise PaymentRefused(
            "host_not_allowed",
            f"This wallet key may not pay {host}; allowed hosts: {', '.join(allowed)}.",
            details={"host": host, "allowed_hosts": allowed},
        )


def check_policy(
    row: Row[Any],
    amount: int,
    *,
    rail: str,
    host: str | None,
    now: datetime,
    spent_period: int | None = None,
    spent_total: int | None = None,
) -> None:
    """Raise the 402 that names the limit and its remedy; the row must be current (or
    ``spent_period`` given: the period's spend as of ``now``; ``spent_total``: the total
    spend before this payment, when the row counts it already)."""
    policy = PolicyValues.of(row)
    if spent_period is None:
        spent_period = row.spent_period_micros
    if spent_total is None:
        spent_total = row.spent_total_micros
    shown = format_micros(amount)
    if policy.allowed_rails is not None and rail not in policy.allowed_rails:
        raise PaymentRefused(
            "rail_not_allowed",
            f"This wallet key may pay on {', '.join(policy.allowed_rails)} only, not {rail}.",
            details={"rail": rail, "allowed_rails": policy.allowed_rails},
        )
    if host is not None:
        check_host(row, host)
    if policy.max_per_tx is not None and amount > policy.max_per_tx:
        raise PaymentRefused(
            "max_per_tx_exceeded",
            f"{shown} is above this wallet key's max_per_tx of "
            f"{format_micros(policy.max_per_tx)}: mint a wallet key with a higher max_per_tx "
            "(or raise it with PATCH /wallet-keys/:id).",
            details={"amount": shown, "max_per_tx": format_micros(policy.max_per_tx)},
        )
    if policy.allowance is not None and spent_period + amount > policy.allowance:
        remaining = max(policy.allowance - spent_period, 0)
        _, reset = period_bounds(policy.period, as_utc(row.created_at), now)
        when = (
            f"wait for the reset at {reset.isoformat()}" if reset is not None else "it never resets"
        )
        raise PaymentRefused(
            "allowance_exceeded",
            f"{shown} would pass this wallet key's allowance ({format_micros(remaining)} of "
            f"{format_micros(policy.allowance)} left this period): mint a higher budget, or "
            f"{when}.",
            details={
                "amount": shown,
                "allowance": format_micros(policy.allowance),
                "remaining_allowance": format_micros(remaining),
                "next_reset_at": None if reset is None else reset.isoformat(),
            },
        )
    if policy.budget is not None and spent_total + amount > policy.budget:
        remaining = max(policy.budget - spent_total, 0)
        raise PaymentRefused(
            "budget_exceeded",
            f"{shown} would pass this wallet key's total budget ({format_micros(remaining)} of "
            f"{format_micros(policy.budget)} left): mint a wallet key with a higher budget.",
            details={
                "amount": shown,
                "budget": format_micros(policy.budget),
                "remaining_budget": format_micros(remaining),
            },
        )


#: ``charge``'s statement, built once (a payment's CPU goes largely to building them).
_COUNT_SPEND = (
    update(_w)
    .where(_w.c.id == bindparam("key_id"))
    .values(
        spent_period_micros=_w.c.spent_period_micros + bindparam("amount"),
        spent_total_micros=_w.c.spent_total_micros + bindparam("amount"),
    )
    .returning(*_w.c)
)


def counting_spend(key_id: str, amount: int) -> tuple[Any, dict[str, Any]]:
    """:func:`count_spend`'s statement and parameters, for a caller that runs it as the
    first part of a statement of its own (``ledger.locked_balances_after``)."""
    return _COUNT_SPEND, {"key_id": key_id, "amount": amount}


def count_spend(conn: Connection, key_id: str, amount: int) -> Row[Any]:
    """Count ``amount`` more spent (less, when negative) this period and in total, and
    answer the key's row after: the ``UPDATE`` takes the key's row lock, and the caller
    checks the policy against the counts before it (``payments.pay_resources``, for
    several payments at once; :func:`charge` for one) in the same transaction."""
    statement, params = counting_spend(key_id, amount)
    return conn.execute(statement, params).one()


def charge(
    conn: Connection,
    key_id: str,
    amount: int,
    *,
    rail: str,
    host: str | None,
    now: datetime,
) -> Row[Any]:
    """Lock the key, roll its period, check its policy and count the spend.

    The caller moves the money (or reserves it) in the same transaction; if that fails
    the whole transaction rolls back, counters included.
    """
    # The usual case in one statement: count the spend (the UPDATE takes the key's row
    # lock) and check the policy against the counts before it; a refusal raises, and
    # the caller's rollback takes the count back.
    counted = count_spend(conn, key_id, amount)
    current, _ = period_bounds(counted.period, as_utc(counted.created_at), now)
    if counted.status == "active" and current <= as_utc(counted.period_started_at):
        check_policy(
            counted,
            amount,
            rail=rail,
            host=host,
            now=now,
            spent_period=counted.spent_period_micros - amount,
            spent_total=counted.spent_total_micros - amount,
        )
        return counted
    # A period to roll (once per period) or a revoked key: uncount, then step by step.
    conn.execute(
        update(_w)
        .where(_w.c.id == key_id)
        .values(
            spent_period_micros=_w.c.spent_period_micros - amount,
            spent_total_micros=_w.c.spent_total_micros - amount,
        )
    )
    row = roll_period(conn, lock_wallet_key(conn, key_id), now)
    if row.status != "active":
        raise DomainError("invalid_credential", "This wallet key is revoked.")
    check_policy(row, amount, rail=rail, host=host, now=now)
    conn.execute(
        update(_w)
        .where(_w.c.id == key_id)
        .values(
            spent_period_micros=_w.c.spent_period_micros + amount,
            spent_total_micros=_w.c.spent_total_micros + amount,
        )
    )
    return row


def would_refuse(
    conn: Connection, row: Row[Any], amount: int, *, rail: str, host: str | None, now: datetime
) -> PaymentRefused | None:
    """What :func:`charge` and the reservation after it would refuse, without writing
    anything (``pay-url``'s dry run): the policy, with a due period reset counted as
    :func:`spend_balance_model` shows it, then the balance."""
    current, _ = period_bounds(row.period, as_utc(row.created_at), now)
    spent_period = 0 if current > as_utc(row.period_started_at) else row.spent_period_micros
    try:
        check_policy(row, amount, rail=rail, host=host, now=now, spent_period=spent_period)
    except PaymentRefused as refused:
        return refused
    if ledger.available_micros(conn, wallet_account(conn, row)) < amount:
        return insufficient_funds(conn, row, amount)
    return None


def refund_charge(conn: Connection, key_id: str, amount: int, *, charged_at: datetime) -> None:
    """Give back a charge whose payment did not happen (a voided reservation)."""
    row = lock_wallet_key(conn, key_id)
    in_this_period = as_utc(charged_at) >= as_utc(row.period_started_at)
    conn.execute(
        update(_w)
        .where(_w.c.id == key_id)
        .values(
            spent_total_micros=_w.c.spent_total_micros - amount,
            spent_period_micros=(
                _w.c.spent_period_micros - amount if in_this_period else _w.c.spent_period_micros
            ),
        )
    )


def insufficient_funds(conn: Connection, row: Row[Any], amount: int) -> PaymentRefused:
    return insufficient_available(ledger.available_micros(conn, wallet_account(conn, row)), amount)


def insufficient_available(available: int, amount: int) -> PaymentRefused:
    """``insufficient_funds`` for a key with ``available`` micros (read under its lock)."""
    return PaymentRefused(
        "insufficient_funds",
        f"The wallet key has {format_micros(available)} available and this payment needs "
        f"{format_micros(amount)}: fund it with POST /wallet-keys/:id/fund.",
        details={"available": format_micros(available), "amount": format_micros(amount)},
    )


# --- views --------------------------------------------------------------------------------


def wallet_key_model(conn: Connection, row: Row[Any]) -> WalletKey:
    account = wallet_account(conn, row)
    return WalletKey(
        id=row.id,
        environment=row.environment,
        name=row.name,
        status=row.status,
        key_prefix=row.key_prefix,
        policy=PolicyValues.of(row).model(),
        balance=from_micros(ledger.available_micros(conn, account)),
        created_at=as_utc(row.created_at),
    )


def spend_balance_model(conn: Connection, row: Row[Any], now: datetime) -> SpendBalance:
    """What the policy still allows, as of ``now`` (a due reset is shown, not written)."""
    policy = PolicyValues.of(row)
    current, nxt = period_bounds(row.period, as_utc(row.created_at), now)
    spent_period = 0 if current > as_utc(row.period_started_at) else row.spent_period_micros
    remaining_allowance = (
        None if policy.allowance is None else max(policy.allowance - spent_period, 0)
    )
    remaining_budget = (
        None if policy.budget is None else max(policy.budget - row.spent_total_micros, 0)
    )
    available = ledger.available_micros(conn, wallet_account(conn, row))
    return SpendBalance(
        wallet_key_id=row.id,
        environment=row.environment,
        status=row.status,
        balance=from_micros(available),
        policy=policy.model(),
        remaining_allowance=None
        if remaining_allowance is None
        else from_micros(remaining_allowance),
        remaining_budget=None if remaining_budget is None else from_micros(remaining_budget),
        spent_this_period=from_micros(spent_period),
        spent_total=from_micros(row.spent_total_micros),
        period_started_at=current,
        next_reset_at=nxt,
    )

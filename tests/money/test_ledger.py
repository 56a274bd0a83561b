"""The ledger itself, on a real database: transfers, reservations posted or voided exactly
once, no overdraft under concurrency, and the audit that recomputes everything."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, select, update

from reference_server.domain import ledger
from reference_server.invariant import InvariantError
from reference_server.store import Database, upgrade
from reference_server.store import tables as t

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    upgrade(database)
    yield database
    database.dispose()


def accounts(db: Database, funded: int = 100) -> tuple[str, str, str]:
    """A sandbox source, a wallet funded with ``funded`` micros, and a seller."""
    with db.write() as conn:
        source = ledger.ensure_account(
            conn, environment="test", kind=ledger.SANDBOX_FUNDING, ref_id="platform", now=NOW
        )
        wallet = ledger.open_account(
            conn, environment="test", kind=ledger.WALLET_KEY, ref_id="vw_1", now=NOW
        )
        seller = ledger.open_account(
            conn, environment="test", kind=ledger.SELLER_BALANCE, ref_id="sel_1", now=NOW
        )
        move(conn, source, wallet, funded, "funding")
    return source, wallet, seller


def balances(db: Database, *ids: str) -> list[tuple[int, int]]:
    a = t.ledger_accounts
    with db.read() as conn:
        rows = {r.id: r for r in conn.execute(select(a).where(a.c.id.in_(ids)))}
    return [(rows[i].balance_micros, rows[i].pending_debit_micros) for i in ids]


def sound(db: Database) -> None:
    with db.read() as conn:
        assert ledger.audit(conn, "test") == []
        assert ledger.sum_of_balances(conn, "test") == 0


def move(conn: Connection, debit: str, credit: str, amount: int, kind: str = "payment") -> None:
    """A posted transfer in test (``payment`` unless told)."""
    ledger.transfer(
        conn, environment="test", debit=debit, credit=credit, amount=amount, kind=kind, now=NOW
    )


def reserve_payment(conn: Connection, debit: str, credit: str, amount: int) -> str:
    """A pending ``payment`` transfer in test (the reservation these tests settle)."""
    return ledger.reserve(
        conn, environment="test", debit=debit, credit=credit, amount=amount, kind="payment", now=NOW
    )


def test_transfer_moves_money_and_refuses_overdraft(db: Database) -> None:
    source, wallet, seller = accounts(db, funded=100)
    with db.write() as conn:
        move(conn, wallet, seller, 60)
    with pytest.raises(ledger.InsufficientFunds) as short, db.write() as conn:
        move(conn, wallet, seller, 41)
    assert short.value.available == 40 and short.value.needed == 41
    assert balances(db, wallet, seller, source) == [(40, 0), (60, 0), (-100, 0)]
    sound(db)


@pytest.mark.parametrize("amount", [0, -5, 1.5])
def test_transfer_amounts_must_be_positive_integers(db: Database, amount: object) -> None:
    _, wallet, seller = accounts(db)
    with pytest.raises(ledger.LedgerError), db.write() as conn:
        move(conn, wallet, seller, amount)  # type: ignore[arg-type]


def test_reservation_is_posted_exactly_once(db: Database) -> None:
    _, wallet, seller = accounts(db, funded=100)
    with db.write() as conn:
        held = reserve_payment(conn, wallet, seller, 70)
    assert balances(db, wallet, seller) == [(100, 70), (0, 0)]
    with pytest.raises(ledger.InsufficientFunds), db.write() as conn:  # only 30 available
        reserve_payment(conn, wallet, seller, 31)
    sound(db)
    with db.write() as conn:
        ledger.post(conn, held, NOW)
    assert balances(db, wallet, seller) == [(30, 0), (70, 0)]
    for again in (ledger.post, ledger.void):
        with pytest.raises(ledger.LedgerError, match="not pending"), db.write() as conn:
            again(conn, held, NOW)
    assert balances(db, wallet, seller) == [(30, 0), (70, 0)]
    sound(db)


def test_part_of_a_reservation_can_be_captured_and_the_rest_is_released(db: Database) -> None:
    """A metered payment holds its maximum and posts what was used: the transfer records
    that amount, and more than was held (or nothing) is refused, writing nothing."""
    _, wallet, seller = accounts(db, funded=100)
    with db.write() as conn:
        held = reserve_payment(conn, wallet, seller, 70)
    for wrong in (0, 71):
        with pytest.raises(ledger.LedgerError, match="cannot capture"), db.write() as conn:
            ledger.post(conn, held, NOW, amount=wrong)
    assert balances(db, wallet, seller) == [(100, 70), (0, 0)]
    with db.write() as conn:
        ledger.post(conn, held, NOW, amount=27)
    assert balances(db, wallet, seller) == [(73, 0), (27, 0)]
    lt = t.ledger_transfers
    with db.read() as conn:
        row = conn.execute(select(lt.c.amount_micros, lt.c.status).where(lt.c.id == held)).one()
    assert tuple(row) == (27, "posted")
    sound(db)


def test_reservation_is_voided_exactly_once(db: Database) -> None:
    _, wallet, seller = accounts(db, funded=100)
    with db.write() as conn:
        held = reserve_payment(conn, wallet, seller, 70)
        ledger.void(conn, held, NOW)
    assert balances(db, wallet, seller) == [(100, 0), (0, 0)]
    for again in (ledger.void, ledger.post):
        with pytest.raises(ledger.LedgerError, match="not pending"), db.write() as conn:
            again(conn, held, NOW)
    sound(db)


def test_concurrent_posts_and_voids_of_one_reservation_settle_it_once(db: Database) -> None:
    _, wallet, seller = accounts(db, funded=100)
    with db.write() as conn:
        held = reserve_payment(conn, wallet, seller, 50)

    def settle(i: int) -> bool:
        try:
            with db.write() as conn:
                (ledger.post if i % 2 else ledger.void)(conn, held, NOW)
            return True
        except ledger.LedgerError:
            return False

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(settle, range(16)))
    assert outcomes.count(True) == 1
    assert balances(db, wallet, seller) in ([(50, 0), (50, 0)], [(100, 0), (0, 0)])
    sound(db)


def test_concurrent_reservations_never_overdraw(db: Database) -> None:
    _, wallet, seller = accounts(db, funded=100)

    def hold(_: int) -> bool:
        try:
            with db.write() as conn:
                reserve_payment(conn, wallet, seller, 10)
            return True
        except ledger.InsufficientFunds:
            return False

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(hold, range(30)))
    assert outcomes.count(True) == 10
    assert balances(db, wallet) == [(100, 100)]
    sound(db)


def test_audit_finds_every_kind_of_damage(db: Database) -> None:
    _, wallet, seller = accounts(db, funded=100)
    a = t.ledger_accounts
    with db.write() as conn:
        conn.execute(
            update(a).where(a.c.id == wallet).values(balance_micros=a.c.balance_micros + 5)
        )
        conn.execute(update(a).where(a.c.id == seller).values(pending_debit_micros=3))
    with db.read() as conn:
        problems = ledger.audit(conn, "test")
    assert any("sum to 5" in p for p in problems)
    assert any(wallet in p and "transfers say" in p for p in problems)
    assert any(seller in p and "pending 3" in p for p in problems)
    assert any(seller in p and "below zero" in p for p in problems)
    with db.write() as conn:  # put it back
        conn.execute(
            update(a).where(a.c.id == wallet).values(balance_micros=a.c.balance_micros - 5)
        )
        conn.execute(update(a).where(a.c.id == seller).values(pending_debit_micros=0))
    sound(db)


def test_platform_fees_spread_over_shards_and_read_as_their_sum(db: Database) -> None:
    """Concurrent fees land on several platform_fees accounts (no one hot row), and the
    platform's balance is their sum; the ledger stays sound."""
    _, wallet, seller = accounts(db, funded=1_000)

    def sell(_: int) -> None:
        with db.write() as conn:
            fees = ledger.platform_account(
                conn, environment="test", kind=ledger.PLATFORM_FEES, now=NOW
            )
            ledger.lock_accounts(conn, [wallet, seller, fees])
            move(conn, wallet, seller, 10)
            move(conn, seller, fees, 1, "platform_fee")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(sell, range(64)))
    a = t.ledger_accounts
    with db.read() as conn:
        shards = conn.execute(
            select(a.c.ref_id, a.c.balance_micros).where(a.c.kind == ledger.PLATFORM_FEES)
        ).all()
        total = ledger.balance_micros(
            conn, environment="test", kind=ledger.PLATFORM_FEES, ref_id=ledger.PLATFORM
        )
    assert len(shards) > 1
    assert total == sum(b for _, b in shards) == 64
    assert balances(db, wallet, seller) == [(1_000 - 640, 0), (640 - 64, 0)]
    sound(db)


def test_only_the_hot_platform_accounts_are_sharded(db: Database) -> None:
    with db.write() as conn, pytest.raises(InvariantError):
        ledger.platform_account(conn, environment="test", kind=ledger.SANDBOX_FUNDING, now=NOW)

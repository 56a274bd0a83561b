"""The comparison's rules on a chain described in the test: what a real chain rarely shows
on demand (a reverted settlement, a payout in flight, a sweep out of the deposit address, an
entry older than the first block read)."""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from eth_utils.address import to_checksum_address

from reference_server.onchain import ChainTransfer, TransactionTransfers
from reference_server.reconcile.books import Books, Entry
from reference_server.reconcile.compare import compare

DEPOSIT = "0x" + "d" * 40
HOT = "0x" + "e" * 40
PAYER = "0x" + "1" * 40
PAYEE = "0x" + "2" * 40
SELLER = "0x" + "3" * 40


def _hash(n: int) -> str:
    return "0x" + f"{n:064x}"


def _move(n: int, sender: str, receiver: str, value: int, block: int = 100) -> ChainTransfer:
    return ChainTransfer(
        tx_hash=_hash(n),
        from_address=str(to_checksum_address(sender)),
        to=str(to_checksum_address(receiver)),
        value=value,
        block_number=block,
    )


@attrs.define
class FakeChain:
    from_block: int
    logs: list[ChainTransfer]
    mined: dict[str, TransactionTransfers]

    def transfers(self, addresses: Iterable[str]) -> tuple[list[ChainTransfer], int]:
        return [m for m in self.logs if m.block_number >= self.from_block], 200

    def transaction(self, tx_hash: str) -> TransactionTransfers | None:
        return self.mined.get(tx_hash)

    def balance(self, address: str) -> int:
        return 7


def _entry(account: str, n: int, sender: str, receiver: str, amount: int) -> Entry:
    return Entry(
        account=account,
        tx_hash=_hash(n),
        from_address=sender,
        to=receiver,
        amount=amount,
        receipt_id=f"rcpt_{n}",
    )


def test_each_rule_names_its_drift() -> None:
    old = _move(1, PAYER, DEPOSIT, 10, block=5)  # before the first block read: by hash
    new = _move(10, PAYER, DEPOSIT, 99, block=250)  # mined after the last block read
    chain = FakeChain(
        from_block=50,
        logs=[
            old,
            _move(2, PAYER, DEPOSIT, 20),  # booked as 25: mismatch
            _move(4, HOT, PAYEE, 40),  # in flight: an attempt of PAYEE for 40 is unresolved
            _move(5, HOT, PAYEE, 41),  # nothing books it
            _move(6, DEPOSIT, PAYEE, 50),  # a sweep nothing books
            _move(7, PAYEE, HOT, 60),  # a refill
        ],
        mined={
            old.tx_hash: TransactionTransfers(
                tx_hash=old.tx_hash, succeeded=True, block_number=5, transfers=(old,)
            ),
            new.tx_hash: TransactionTransfers(
                tx_hash=new.tx_hash, succeeded=True, block_number=250, transfers=(new,)
            ),
            _hash(3): TransactionTransfers(
                tx_hash=_hash(3), succeeded=False, block_number=120, transfers=()
            ),
            _hash(8): TransactionTransfers(
                tx_hash=_hash(8),
                succeeded=True,
                block_number=120,
                transfers=(_move(8, PAYER, SELLER, 70),),
            ),
        },
    )
    books = Books(
        deposits=(
            _entry("deposits", 1, PAYER, DEPOSIT, 10),
            _entry("deposits", 2, PAYER, DEPOSIT, 25),
            _entry("deposits", 10, PAYER, DEPOSIT, 99),
        ),
        payouts=(_entry("hot_wallet", 3, HOT, PAYEE, 30),),
        direct=(
            _entry("direct_wallet", 8, PAYER, SELLER, 70),
            _entry("direct_wallet", 9, PAYER, SELLER, 80),
        ),
        deposits_total=134,
        payouts_total=30,
        unresolved=((PAYEE, 40),),
    )
    report = compare("live", books, chain, DEPOSIT, HOT)
    found = {(f.kind, f.account, f.tx_hash, f.drift) for f in report.findings}
    assert ("mismatch", "deposits", _hash(2), True) in found
    assert ("failed_on_chain", "hot_wallet", _hash(3), True) in found
    assert ("in_flight", "hot_wallet", _hash(4), False) in found
    assert ("unbooked_out", "hot_wallet", _hash(5), True) in found
    assert ("unbooked_out", "deposits", _hash(6), True) in found
    assert ("missing_on_chain", "direct_wallet", _hash(9), True) in found
    assert not any(f.tx_hash == _hash(1) for f in report.findings)  # older and sound
    assert not any(f.tx_hash == _hash(8) for f in report.findings)  # settled as booked
    assert not any(f.tx_hash == _hash(10) for f in report.findings)  # newer and sound
    totals = {
        f.account: (f.ledger_micros, f.chain_micros) for f in report.findings if f.kind == "total"
    }
    assert totals == {
        "deposits": (25, 20),  # the older and newer entries: in neither total
        "hot_wallet": (30, 81),
        "direct_wallet": (150, 70),
    }
    held = next(f for f in report.findings if f.kind == "balance")
    assert (held.ledger_micros, held.chain_micros, held.drift) == (None, 7, False)
    refill = next(f for f in report.findings if f.kind == "refill")
    assert (refill.chain_micros, refill.drift) == (60, False)
    assert (report.from_block, report.to_block) == (50, 200)
    assert not any(f.kind == "ledger_without_tx" for f in report.findings)


def test_money_a_ledger_account_moved_without_a_transaction_is_drift() -> None:
    chain = FakeChain(from_block=1, logs=[], mined={})  # balances: information only
    books = Books(
        deposits=(), payouts=(), direct=(), deposits_total=5, payouts_total=0, unresolved=()
    )
    report = compare("live", books, chain, DEPOSIT, HOT)
    [drift] = report.drift
    assert (drift.kind, drift.account, drift.ledger_micros) == ("ledger_without_tx", "deposits", 5)

"""The comparison: the ledger's entries against the chain's transfers, as findings.

Every entry that names a transaction must match a transfer of that transaction (same
sender, receiver and amount); entries not among the transfers read (their transaction
may lie before the first block read) are looked up by hash.  Every transfer into or out of
the service's addresses must match an entry, except a transfer into the hot wallet (the
operator refilling its float) and one out of it while a pay-url attempt is unresolved.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable

from eth_utils.address import to_checksum_address

from ..onchain import ChainTransfer
from .books import Books, Entry
from .chains import ChainView
from .findings import (
    BALANCE,
    DEPOSITS,
    DIRECT_WALLET,
    FAILED_ON_CHAIN,
    FLOAT,
    HOT_WALLET,
    IN_FLIGHT,
    LEDGER_WITHOUT_TX,
    MISMATCH,
    MISSING_ON_CHAIN,
    REFILL,
    TOTAL,
    UNBOOKED_IN,
    UNBOOKED_OUT,
    Finding,
    Report,
)

__all__ = ["compare"]


def _cs(address: str | None) -> str | None:
    return None if address is None else str(to_checksum_address(address))


def _same_parties(entry: Entry, move: ChainTransfer) -> bool:
    return (entry.to is None or move.to.lower() == entry.to) and (
        entry.from_address is None or move.from_address.lower() == entry.from_address
    )


def _describe(moves: Iterable[ChainTransfer]) -> str:
    said = [f"{m.from_address} -> {m.to} {m.value}" for m in moves]
    return "the transaction moved " + ("; ".join(said) or "no tokens")


class _Run:
    def __init__(self, chain: ChainView, moves: list[ChainTransfer], last: int) -> None:
        self.chain = chain
        self.moves = moves
        self.last = last
        self.hashes: dict[str, list[int]] = defaultdict(list)
        for index, move in enumerate(moves):
            self.hashes[move.tx_hash].append(index)
        self.matched: set[int] = set()
        self.findings: list[Finding] = []

    def check(self, entry: Entry) -> int:
        """Match one entry; the amount it accounts for within the blocks read (0 for an
        entry whose transaction is older), recording drift as findings."""
        candidates = [
            i for i in self.hashes.get(entry.tx_hash, []) if _same_parties(entry, self.moves[i])
        ]
        exact = [i for i in candidates if self.moves[i].value == entry.amount]
        if exact or candidates:
            index = (exact or candidates)[0]
            self.matched.add(index)
            if not exact:
                self._drift(MISMATCH, entry, self.moves[index].value, "the amounts differ")
            return entry.amount
        return self.by_hash(entry)

    def by_hash(self, entry: Entry) -> int:
        mined = self.chain.transaction(entry.tx_hash)
        if mined is None:
            self._drift(MISSING_ON_CHAIN, entry, None, "the chain has no such transaction")
            return entry.amount
        if not mined.succeeded:
            self._drift(FAILED_ON_CHAIN, entry, 0, "the transaction reverted")
            return entry.amount
        fits = [m for m in mined.transfers if _same_parties(entry, m) and m.value == entry.amount]
        if not fits:
            chain = sum(m.value for m in mined.transfers if _same_parties(entry, m))
            self._drift(MISMATCH, entry, chain, _describe(mined.transfers))
            return entry.amount
        # Older than the first block read, or mined after the last one (booked while the
        # logs were read): sound, and in neither side's total.
        in_range = self.chain.from_block <= mined.block_number <= self.last
        return entry.amount if in_range and entry.account != DIRECT_WALLET else 0

    def _drift(self, kind: str, entry: Entry, chain: int | None, detail: str) -> None:
        self.findings.append(
            Finding(
                kind=kind,
                account=entry.account,
                address=_cs(entry.to),
                ledger_micros=entry.amount,
                chain_micros=chain,
                tx_hash=entry.tx_hash,
                detail=f"receipt {entry.receipt_id}: {detail}",
            )
        )

    def unmatched(self) -> list[ChainTransfer]:
        return [m for i, m in enumerate(self.moves) if i not in self.matched]


def compare(
    environment: str,
    books: Books | Callable[[], Books],
    chain: ChainView,
    deposit: str | None,
    hot: str | None,
) -> Report:
    """Reconcile one environment's books with its chain.  ``books`` may be a reader, called
    once the chain's transfers are read: a payment settled and booked meanwhile is then
    an entry mined after the last block read (left out), never a transfer its books lack."""
    deposit, hot = (a.lower() if a else None for a in (deposit, hot))
    watched = [a for a in (deposit, hot) if a]
    moves, last = chain.transfers(watched) if watched else ([], chain.from_block)
    if callable(books):
        books = books()
    run = _Run(chain, moves, last)
    ledger_in = sum(run.check(e) for e in books.deposits) if deposit else 0
    ledger_out = sum(run.check(e) for e in books.payouts) if hot else 0
    direct_ok = 0
    for entry in books.direct:
        before = len(run.findings)
        run.by_hash(entry)
        direct_ok += entry.amount if len(run.findings) == before else 0
    unresolved = list(books.unresolved)
    unbooked = [_unbooked(m, deposit, hot, unresolved) for m in run.unmatched()]
    run.findings.extend(f for f in unbooked if f.kind != REFILL)
    refills = [f.chain_micros or 0 for f in unbooked if f.kind == REFILL]
    chain_in = sum(m.value for m in moves if m.to.lower() == deposit)
    chain_out = sum(m.value for m in moves if m.from_address.lower() == hot)
    findings = list(
        _totals(books, deposit, hot, (ledger_in, chain_in), (ledger_out, chain_out), direct_ok)
    )
    if deposit:
        whole = chain.from_block == 0
        findings.append(
            Finding(
                kind=BALANCE,
                account=DEPOSITS,
                address=_cs(deposit),
                ledger_micros=books.deposits_total if whole else None,
                chain_micros=chain.balance(deposit),
                detail="the deposit address's balance now"
                + ("" if whole else " (the chain is read from a later block)"),
            )
        )
    if hot:
        of_hot = functools.partial(Finding, account=HOT_WALLET, address=_cs(hot))
        held = "the hot wallet's balance now"
        findings.append(of_hot(kind=FLOAT, chain_micros=chain.balance(hot), detail=held))
        refilled = f"{len(refills)} transfer(s) in: the float refilled"
        findings.append(of_hot(kind=REFILL, chain_micros=sum(refills), detail=refilled))
    return Report(
        environment=environment,
        from_block=chain.from_block,
        to_block=last,
        findings=(*findings, *run.findings),
    )


def _unbooked(
    move: ChainTransfer, deposit: str | None, hot: str | None, unresolved: list[tuple[str, int]]
) -> Finding:
    """What a transfer of the service's addresses that no entry matched is."""
    sender, receiver = move.from_address.lower(), move.to.lower()
    found = functools.partial(Finding, chain_micros=move.value, tx_hash=move.tx_hash)
    if receiver == deposit:
        why = f"from {move.from_address}: no receipt books it"
        return found(kind=UNBOOKED_IN, account=DEPOSITS, address=move.to, detail=why)
    if sender == hot:
        flying = (receiver, move.value) in unresolved
        if flying:
            unresolved.remove((receiver, move.value))
        kind = IN_FLIGHT if flying else UNBOOKED_OUT
        why = "a pay-url attempt is unresolved" if flying else "no pay-url receipt books it"
        detail = f"to {move.to}: {why}"
        return found(kind=kind, account=HOT_WALLET, address=move.from_address, detail=detail)
    if sender == deposit:
        why = f"to {move.to}: nothing books it"
        return found(kind=UNBOOKED_OUT, account=DEPOSITS, address=move.from_address, detail=why)
    why = f"from {move.from_address}: float refilled"
    return found(kind=REFILL, account=HOT_WALLET, address=move.to, detail=why)


def _totals(
    books: Books,
    deposit: str | None,
    hot: str | None,
    received: tuple[int, int],
    paid: tuple[int, int],
    direct_ok: int,
) -> Iterable[Finding]:
    """Each watched address's totals, ledger against chain, and a finding where the receipts
    disagree with the table that lets the money in or out: the same checks for both sides."""
    sides = (
        (DEPOSITS, deposit, received, books.deposits, books.deposits_total),
        (HOT_WALLET, hot, paid, books.payouts, books.payouts_total),
    )
    said = (
        ("received by the deposit address", "chain_deposits let in {}; receipts book {}"),
        ("paid out by the hot wallet", "chain_payouts holds {}; pay-url receipts book {}"),
    )
    for (account, address, sums, entries, total), (what, gap) in zip(sides, said, strict=True):
        found = functools.partial(Finding, account=account, address=_cs(address))
        if address:
            yield found(kind=TOTAL, ledger_micros=sums[0], chain_micros=sums[1], detail=what)
        booked = sum(e.amount for e in entries)
        if booked != total or (total and not address):
            yield found(
                kind=LEDGER_WITHOUT_TX, ledger_micros=total, detail=gap.format(total, booked)
            )
    if books.direct:
        yield Finding(
            kind=TOTAL,
            account=DIRECT_WALLET,
            ledger_micros=sum(e.amount for e in books.direct),
            chain_micros=direct_ok,
            detail="settled to sellers' own wallets",
        )

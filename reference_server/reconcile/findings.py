"""What a reconciliation found: typed rows, drift or information, as a table or JSON.

A finding names the ledger account it is about (``deposits``, ``hot_wallet``,
``direct_wallet``), the on-chain address, the two amounts (micro-USD, ``None`` where a
side has nothing to say) and the transaction.  Only the drift kinds make a run fail;
the rest (totals that agree, the hot wallet's float and refills, payments in flight)
are there so an operator sees what was compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from svc.money import format_micros

__all__ = ["DRIFT_KINDS", "Finding", "Report", "columns", "render_table"]

DEPOSITS = "deposits"
HOT_WALLET = "hot_wallet"
DIRECT_WALLET = "direct_wallet"

#: Per account: the ledger's total and the chain's over the blocks read (drift if unequal).
TOTAL = "total"
#: The deposit address's token balance on chain now against what the ledger let in from
#: it (drift if unequal, when the chain is read from block 0; information otherwise).
BALANCE = "balance"
#: The hot wallet's token balance on chain now (information).
FLOAT = "float"
#: A transfer into the hot wallet: the operator refilling its float (information).
REFILL = "refill"
#: A transfer out of the hot wallet while a pay-url attempt of that amount and payee is
#: still unresolved: it is booked when the attempt concludes (information).
IN_FLIGHT = "in_flight"
#: A chain transfer into the deposit address that no receipt books.
UNBOOKED_IN = "unbooked_in"
#: A chain transfer out of the deposit address or the hot wallet that nothing booked.
UNBOOKED_OUT = "unbooked_out"
#: A ledger entry whose transaction the chain does not know.
MISSING_ON_CHAIN = "missing_on_chain"
#: A ledger entry whose transaction reverted.
FAILED_ON_CHAIN = "failed_on_chain"
#: A ledger entry whose transaction moved another amount, or between other addresses.
MISMATCH = "mismatch"
#: The ledger account moved money that no entry naming a transaction explains.
LEDGER_WITHOUT_TX = "ledger_without_tx"

DRIFT_KINDS = frozenset(
    {UNBOOKED_IN, UNBOOKED_OUT, MISSING_ON_CHAIN, FAILED_ON_CHAIN, MISMATCH, LEDGER_WITHOUT_TX}
)


@attrs.frozen(kw_only=True)
class Finding:
    kind: str
    account: str
    address: str | None = None
    ledger_micros: int | None = None
    chain_micros: int | None = None
    tx_hash: str | None = None
    detail: str = ""

    @property
    def drift(self) -> bool:
        if self.kind in (TOTAL, BALANCE):
            return self.ledger_micros is not None and self.ledger_micros != self.chain_micros
        return self.kind in DRIFT_KINDS

    def to_json(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "drift": self.drift}


@attrs.frozen(kw_only=True)
class Report:
    """One run over one environment: what was compared, from which block to which."""

    environment: str
    from_block: int
    to_block: int
    findings: tuple[Finding, ...]

    @property
    def drift(self) -> list[Finding]:
        return [f for f in self.findings if f.drift]

    def to_json(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "from_block": self.from_block,
            "to_block": self.to_block,
            "drift_count": len(self.drift),
            "findings": [f.to_json() for f in self.findings],
        }


def _amount(micros: int | None) -> str:
    return "-" if micros is None else format_micros(micros)


def render_table(findings: Iterable[Finding]) -> str:
    """Fixed-width columns, drift first marked ``DRIFT``; amounts in USD."""
    rows = [("STATUS", "KIND", "ACCOUNT", "ADDRESS", "LEDGER", "CHAIN", "TX", "DETAIL")]
    for f in sorted(findings, key=lambda f: not f.drift):
        ledger, chain = _amount(f.ledger_micros), _amount(f.chain_micros)
        row = (f.kind, f.account, f.address or "-", ledger, chain, f.tx_hash or "-", f.detail)
        rows.append(("DRIFT" if f.drift else "ok", *row))
    return columns(rows)


def columns(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` as fixed-width columns, the last one as long as it is."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(
            [*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in rows
    )

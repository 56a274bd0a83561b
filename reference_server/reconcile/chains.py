"""The chain's side of a reconciliation, one interface over two chains:

* :class:`LiveChain` reads the configured node (``Settings.live_rpc_url``) through
  :mod:`reference_server.onchain`: ``Transfer`` logs from ``live_reconcile_from_block``;
* :class:`SandboxChain` reads the sandbox chain's transaction log in the database
  (``test``), where a mint is a transfer from the zero address, as on a real token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from eth_utils.address import to_checksum_address
from sqlalchemy import Connection, func, or_, select

from ..onchain import ChainTransfer, TokenReader, TransactionTransfers
from ..sandbox import chain as sandbox
from ..store import tables as t

__all__ = ["ChainView", "LiveChain", "SandboxChain"]


class ChainView(Protocol):
    #: The first block read by :meth:`transfers`: transactions before it are out of range.
    from_block: int

    def transfers(self, addresses: Iterable[str]) -> tuple[list[ChainTransfer], int]:
        """Every token transfer from or to ``addresses`` since ``from_block``, and the last
        block read."""

    def transaction(self, tx_hash: str) -> TransactionTransfers | None:
        """The mined transaction and its token transfers; ``None`` if the chain has none."""

    def balance(self, address: str) -> int:
        """The token balance of ``address`` now."""


class LiveChain:
    def __init__(self, rpc_url: str, asset: str, from_block: int) -> None:
        self.reader = TokenReader(rpc_url, asset)
        self.from_block = from_block

    def transfers(self, addresses: Iterable[str]) -> tuple[list[ChainTransfer], int]:
        return self.reader.transfers(addresses, from_block=self.from_block)

    def transaction(self, tx_hash: str) -> TransactionTransfers | None:
        return self.reader.transaction(tx_hash)

    def balance(self, address: str) -> int:
        return self.reader.balance_of(address)


_tx = t.sandbox_transactions


def _checksum(address: str) -> str:
    return str(to_checksum_address(address))


def _move(row: Any) -> ChainTransfer:
    return ChainTransfer(
        tx_hash=row.tx_hash.lower(),
        from_address=_checksum(row.from_address),
        to=_checksum(row.to_address),
        value=int(row.value),
        block_number=int(row.block_number),
    )


class SandboxChain:
    """The sandbox chain in ``conn``'s database; cancellations move nothing and are skipped."""

    def __init__(self, conn: Connection, from_block: int = 0) -> None:
        self.conn = conn
        self.from_block = from_block

    def transfers(self, addresses: Iterable[str]) -> tuple[list[ChainTransfer], int]:
        keys = sorted({a.lower() for a in addresses})
        last = int(
            self.conn.execute(select(func.coalesce(func.max(_tx.c.block_number), 0))).scalar() or 0
        )
        rows = self.conn.execute(
            select(_tx)
            .where(
                _tx.c.block_number >= self.from_block,
                _tx.c.kind != sandbox.CANCEL,
                or_(_tx.c.from_address.in_(keys), _tx.c.to_address.in_(keys)),
            )
            .order_by(_tx.c.block_number)
        )
        return [_move(row) for row in rows], last

    def transaction(self, tx_hash: str) -> TransactionTransfers | None:
        row = self.conn.execute(select(_tx).where(_tx.c.tx_hash == tx_hash.lower())).first()
        if row is None:
            return None
        moves = () if row.kind == sandbox.CANCEL else (_move(row),)
        return TransactionTransfers(
            tx_hash=row.tx_hash.lower(),
            succeeded=True,
            block_number=int(row.block_number),
            transfers=moves,
        )

    def balance(self, address: str) -> int:
        return sandbox.balance_of(self.conn, address)

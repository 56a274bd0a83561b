"""Reading the live chain through ``Settings.live_rpc_url`` (web3).

Reconciliation's reads are here, named ``*_transfers``: the token's ``Transfer`` logs into
or out of a set of addresses over a block range (``eth_getLogs`` in bounded chunks, since
nodes and providers cap a range), and the transfers one transaction made, by hash, with
whether it succeeded.  Amounts are the token's atomic units (6 decimals: micro-USD).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from eth_utils.address import to_checksum_address

__all__ = [
    "TRANSFER_TOPIC",
    "ChainTransfer",
    "TransactionTransfers",
    "connect",
    "token_balance",
    "token_transfers",
    "transaction_transfers",
]

#: ``keccak("Transfer(address,address,uint256)")``: the ERC-20 event every move emits.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
#: Blocks per ``eth_getLogs`` call: within what public providers allow (often 10 000).
LOG_CHUNK_BLOCKS = 5_000
_BALANCE_OF = "0x70a08231"


@attrs.frozen(kw_only=True)
class ChainTransfer:
    """One token ``Transfer`` as the chain recorded it (addresses checksummed)."""

    tx_hash: str
    from_address: str
    to: str
    value: int
    block_number: int


@attrs.frozen(kw_only=True)
class TransactionTransfers:
    """A mined transaction: did it succeed, where, and the token transfers it made."""

    tx_hash: str
    succeeded: bool
    block_number: int
    transfers: tuple[ChainTransfer, ...]


def connect(rpc_url: str, timeout: float = 10.0) -> Any:
    """A web3 client of the node at ``rpc_url`` (imported here: only live reads need it)."""
    from web3 import Web3

    return Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout}))


def _topic(address: str) -> str:
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")


def _address(topic: Any) -> str:
    raw = topic.hex() if isinstance(topic, bytes | bytearray) else str(topic)
    return str(to_checksum_address("0x" + raw.removeprefix("0x")[-40:]))


def _hex(value: Any) -> str:
    text = value.hex() if isinstance(value, bytes | bytearray) else str(value)
    return "0x" + text.removeprefix("0x").lower()


def _transfer(log: Any) -> ChainTransfer | None:
    topics = log["topics"]
    if len(topics) != 3 or _hex(topics[0]) != TRANSFER_TOPIC:
        return None
    return ChainTransfer(
        tx_hash=_hex(log["transactionHash"]),
        from_address=_address(topics[1]),
        to=_address(topics[2]),
        value=int(_hex(log["data"]), 16),
        block_number=int(log["blockNumber"]),
    )


def token_transfers(
    w3: Any,
    asset: str,
    addresses: Iterable[str],
    *,
    from_block: int,
    to_block: int | None = None,
    chunk: int = LOG_CHUNK_BLOCKS,
) -> tuple[list[ChainTransfer], int]:
    """Every ``Transfer`` of ``asset`` from or to any of ``addresses`` in blocks
    ``from_block..to_block`` (the latest when ``None``), in chain order, and the last
    block read.  Two filtered queries per chunk (sender, receiver), merged by log."""
    topics = [_topic(a) for a in sorted({a.lower() for a in addresses})]
    last = int(w3.eth.block_number) if to_block is None else to_block
    seen: dict[tuple[str, int], ChainTransfer] = {}
    token = to_checksum_address(asset)
    start = max(from_block, 0)
    while topics and start <= last:
        end = min(start + chunk - 1, last)
        for where in ([TRANSFER_TOPIC, topics], [TRANSFER_TOPIC, None, topics]):
            logs = w3.eth.get_logs(
                {"fromBlock": start, "toBlock": end, "address": token, "topics": where}
            )
            for log in logs:
                moved = _transfer(log)
                if moved is not None:
                    seen[(moved.tx_hash, int(log["logIndex"]))] = moved
        start = end + 1
    return [seen[key] for key in sorted(seen, key=lambda k: (seen[k].block_number, k[1]))], last


def transaction_transfers(w3: Any, asset: str, tx_hash: str) -> TransactionTransfers | None:
    """The mined transaction ``tx_hash`` and the ``asset`` transfers it made; ``None`` when
    the node knows no such mined transaction."""
    from web3.exceptions import TransactionNotFound

    try:
        receipt = w3.eth.get_transaction_receipt(tx_hash)
    except TransactionNotFound:
        return None
    if receipt is None:
        return None
    token = asset.lower()
    moves: Sequence[ChainTransfer | None] = [
        _transfer(log) for log in receipt["logs"] if str(log["address"]).lower() == token
    ]
    return TransactionTransfers(
        tx_hash=_hex(receipt["transactionHash"]),
        succeeded=int(receipt["status"]) == 1,
        block_number=int(receipt["blockNumber"]),
        transfers=tuple(m for m in moves if m is not None),
    )


def token_balance(w3: Any, asset: str, holder: str) -> int:
    """``balanceOf(holder)`` of ``asset`` at the latest block."""
    data = _BALANCE_OF + _topic(holder).removeprefix("0x")
    answer = w3.eth.call({"to": to_checksum_address(asset), "data": data})
    return int(_hex(answer), 16)

"""Reading the live chain: what the token says, never what a facilitator or a URL says.

A facilitator that timed out, or a paid URL's receipt, cannot be the last word on whether
money moved; the token contract is.  ``live_rpc_url`` names a node of the live chain, and
:class:`TokenReader` asks it what the books need: a balance, whether an EIP-3009
authorization was used (and by which transaction), the token transfers one transaction
made, and the ``Transfer`` logs into or out of the service's addresses over a block range
(reconciliation).  Read-only: nothing here signs or sends.  Amounts are the token's atomic
units (6 decimals: micro-USD).

web3 is imported on first use (it is heavy, and its import raises the recursion limit,
which is put back as :mod:`reference_server.recursion` says).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs
from eth_utils.address import to_checksum_address

from .recursion import keeping_recursion_limit

__all__ = [
    "LOG_CHUNK_BLOCKS",
    "TRANSFER_TOPIC",
    "ChainTransfer",
    "ChainUnreachable",
    "TokenReader",
    "TransactionTransfers",
]

_T = TypeVar("_T")

#: Just what is read, in the shape every EIP-3009 token (USDC, the devchain's) has.
_ABI: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "balanceOf",
        "stateMutability": "view",
        "inputs": [{"name": "owner", "type": "address"}],
        "outputs": [{"name": "", "type": "uint256"}],
    },
    {
        "type": "function",
        "name": "authorizationState",
        "stateMutability": "view",
        "inputs": [
            {"name": "authorizer", "type": "address"},
            {"name": "nonce", "type": "bytes32"},
        ],
        "outputs": [{"name": "", "type": "bool"}],
    },
]
#: keccak256 of ``Transfer(address,address,uint256)``: the ERC-20 event every move emits.
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
#: keccak256 of EIP-3009's ``AuthorizationUsed(address,bytes32)``.
_AUTHORIZATION_USED = "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5"
#: Blocks per ``eth_getLogs`` call: within what public providers allow (often 10 000).
LOG_CHUNK_BLOCKS = 5_000


class ChainUnreachable(Exception):
    """The node did not answer (down, or too slow): nothing can be decided now."""


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


def _topic(address: str) -> str:
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")


def _hex(value: Any) -> str:
    text = value.hex() if isinstance(value, bytes | bytearray) else str(value)
    return "0x" + text.removeprefix("0x").lower()


def _address(topic: Any) -> str:
    return str(to_checksum_address("0x" + _hex(topic)[-40:]))


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


@functools.cache
def _web3_class() -> Any:
    with keeping_recursion_limit():
        from web3 import Web3
    return Web3


def _not_found(exc: Exception) -> bool:
    return type(exc).__name__ == "TransactionNotFound"


@attrs.frozen
class TokenReader:
    """The token at ``asset`` on the node at ``rpc_url`` (blocking calls)."""

    rpc_url: str
    asset: str
    timeout: float = 10.0

    @functools.cached_property
    def _w3(self) -> Any:
        web3 = _web3_class()
        return web3(web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": self.timeout}))

    @functools.cached_property
    def _token(self) -> Any:
        return self._w3.eth.contract(address=to_checksum_address(self.asset), abi=_ABI)

    def _ask(self, question: Callable[[], _T]) -> _T:
        try:
            return question()
        except Exception as exc:  # requests' errors, web3's, a node that answered garbage
            transport = type(exc).__module__.split(".")[0] in ("requests", "urllib3", "aiohttp")
            if transport or isinstance(exc, OSError | TimeoutError):
                raise ChainUnreachable(f"the chain's node did not answer: {exc}") from exc
            raise

    def balance_of(self, holder: str) -> int:
        """The token balance of ``holder`` at the latest block, in atomic units."""
        call = self._token.functions.balanceOf(to_checksum_address(holder))
        return int(self._ask(call.call))

    def authorization_used(self, authorizer: str, nonce: str) -> bool:
        """EIP-3009 ``authorizationState``: was ``nonce`` of ``authorizer`` used (or
        cancelled) on chain?"""
        call = self._token.functions.authorizationState(
            to_checksum_address(authorizer), bytes.fromhex(nonce.removeprefix("0x"))
        )
        return bool(self._ask(call.call))

    def authorization_transaction(self, authorizer: str, nonce: str) -> str | None:
        """The transaction whose ``AuthorizationUsed`` names ``authorizer``'s ``nonce``
        (the one that used it), or ``None``."""
        which = "0x" + nonce.lower().removeprefix("0x").rjust(64, "0")
        query = {
            "address": to_checksum_address(self.asset),
            "fromBlock": 0,
            "toBlock": "latest",
            "topics": [_AUTHORIZATION_USED, _topic(authorizer), which],
        }
        logs = self._ask(lambda: self._w3.eth.get_logs(query))
        return None if not logs else _hex(logs[0]["transactionHash"])

    def transaction(self, tx_hash: str) -> TransactionTransfers | None:
        """The mined transaction ``tx_hash`` and the token transfers it made; ``None`` when
        the node knows no such mined transaction."""

        def receipt() -> Any:
            try:
                return self._w3.eth.get_transaction_receipt(tx_hash)
            except Exception as exc:
                if _not_found(exc):
                    return None
                raise

        found = self._ask(receipt)
        if found is None:
            return None
        token = self.asset.lower()
        moves = [_transfer(log) for log in found["logs"] if str(log["address"]).lower() == token]
        return TransactionTransfers(
            tx_hash=_hex(found["transactionHash"]),
            succeeded=int(found["status"]) == 1,
            block_number=int(found["blockNumber"]),
            transfers=tuple(m for m in moves if m is not None),
        )

    def paid(self, tx_hash: str, *, sender: str, receiver: str, value: int) -> bool:
        """Did ``tx_hash`` move exactly ``value`` of the token from ``sender`` to
        ``receiver`` (mined, succeeded)?"""
        mined = self.transaction(tx_hash)
        if mined is None or not mined.succeeded:
            return False
        want = (sender.lower(), receiver.lower(), value)
        return any((m.from_address.lower(), m.to.lower(), m.value) == want for m in mined.transfers)

    def transfers(
        self,
        addresses: Iterable[str],
        *,
        from_block: int,
        to_block: int | None = None,
        chunk: int = LOG_CHUNK_BLOCKS,
    ) -> tuple[list[ChainTransfer], int]:
        """Every ``Transfer`` of the token from or to any of ``addresses`` in blocks
        ``from_block..to_block`` (the latest when ``None``), in chain order, and the last
        block read.  Two filtered queries per chunk (sender, receiver), merged by log."""
        topics = [_topic(a) for a in sorted({a.lower() for a in addresses})]
        w3 = self._w3
        last = int(self._ask(lambda: w3.eth.block_number)) if to_block is None else to_block
        seen: dict[tuple[str, int], ChainTransfer] = {}
        token = to_checksum_address(self.asset)
        start = max(from_block, 0)
        while topics and start <= last:
            end = min(start + chunk - 1, last)
            for where in ([TRANSFER_TOPIC, topics], [TRANSFER_TOPIC, None, topics]):
                query = {"fromBlock": start, "toBlock": end, "address": token, "topics": where}
                for log in self._ask(lambda q=query: w3.eth.get_logs(q)):  # type: ignore[misc]
                    moved = _transfer(log)
                    if moved is not None:
                        seen[(moved.tx_hash, int(log["logIndex"]))] = moved
            start = end + 1
        order = sorted(seen, key=lambda k: (seen[k].block_number, k[1]))
        return [seen[key] for key in order], last

"""Reading the live chain: what the token says, never what a facilitator or a URL says.

A facilitator that timed out, or a paid URL's receipt, cannot be the last word on whether
money moved; the token contract is.  ``live_rpc_url`` names a node of the live chain, and
this module asks it the few questions the books need: a balance, whether an EIP-3009
authorization was used (and by which transaction), and the token transfers a transaction
made.  Read-only: nothing here signs or sends.

web3 is imported on first use (it is heavy, and its import raises the recursion limit,
which is put back as :mod:`reference_server.recursion` says).
"""

from __future__ import annotations

import functools
from typing import Any

import attrs

from .recursion import keeping_recursion_limit

__all__ = [
    "ChainUnreachable",
    "TokenReader",
    "TokenTransfer",
]

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
#: keccak256 of the two events' signatures (topic 0).
_TRANSFER = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
_AUTHORIZATION_USED = "98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5"


class ChainUnreachable(Exception):
    """The node did not answer (down, or too slow): nothing can be decided now."""


@attrs.frozen
class TokenTransfer:
    """One ``Transfer`` event of the token, in atomic units."""

    sender: str
    receiver: str
    value: int


def _address(topic: bytes) -> str:
    with keeping_recursion_limit():
        from eth_utils.address import to_checksum_address
    return str(to_checksum_address(topic[-20:]))


@functools.cache
def _web3_class() -> Any:
    with keeping_recursion_limit():
        from web3 import Web3
    return Web3


@attrs.frozen
class TokenReader:
    """The live token at ``asset`` on the node at ``rpc_url`` (blocking calls)."""

    rpc_url: str
    asset: str
    timeout: float = 10.0

    def _w3(self) -> Any:
        web3 = _web3_class()
        return web3(web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": self.timeout}))

    def _token(self) -> Any:
        w3 = self._w3()
        return w3, w3.eth.contract(address=w3.to_checksum_address(self.asset), abi=_ABI)

    def _ask(self, question: Any) -> Any:
        try:
            return question()
        except (OSError, TimeoutError) as exc:
            raise ChainUnreachable(f"the live chain's node did not answer: {exc}") from exc
        except Exception as exc:  # requests' errors, web3's, a node that answered garbage
            if type(exc).__module__.split(".")[0] in ("requests", "urllib3", "aiohttp"):
                raise ChainUnreachable(f"the live chain's node did not answer: {exc}") from exc
            raise

    def balance_of(self, holder: str) -> int:
        """The token balance of ``holder`` now, in atomic units."""
        w3, token = self._token()
        return int(
            self._ask(lambda: token.functions.balanceOf(w3.to_checksum_address(holder)).call())
        )

    def authorization_used(self, authorizer: str, nonce: str) -> bool:
        """EIP-3009 ``authorizationState``: was ``nonce`` of ``authorizer`` used (or
        cancelled) on chain?"""
        w3, token = self._token()
        call = token.functions.authorizationState(
            w3.to_checksum_address(authorizer), bytes.fromhex(nonce.removeprefix("0x"))
        )
        return bool(self._ask(call.call))

    def authorization_transaction(self, authorizer: str, nonce: str) -> str | None:
        """The transaction whose ``AuthorizationUsed`` names ``authorizer``'s ``nonce``
        (the one that used it), or ``None``."""
        w3, _ = self._token()
        who = "0x" + "0" * 24 + authorizer.lower().removeprefix("0x")
        which = "0x" + nonce.lower().removeprefix("0x").rjust(64, "0")
        logs = self._ask(
            lambda: w3.eth.get_logs(
                {
                    "address": w3.to_checksum_address(self.asset),
                    "fromBlock": 0,
                    "toBlock": "latest",
                    "topics": ["0x" + _AUTHORIZATION_USED, who, which],
                }
            )
        )
        return None if not logs else "0x" + bytes(logs[0]["transactionHash"]).hex()

    def transfers_in(self, tx_hash: str) -> list[TokenTransfer] | None:
        """The token's transfers that ``tx_hash`` made: ``None`` when the chain has no
        such transaction mined, an empty list when it reverted or moved none."""
        w3, _ = self._token()

        def receipt() -> Any:
            try:
                return w3.eth.get_transaction_receipt(tx_hash)
            except Exception as exc:
                if type(exc).__name__ == "TransactionNotFound":
                    return None
                raise

        found = self._ask(receipt)
        if found is None:
            return None
        if found["status"] != 1:
            return []
        asset = self.asset.lower()
        return [
            TokenTransfer(
                sender=_address(bytes(log["topics"][1])),
                receiver=_address(bytes(log["topics"][2])),
                value=int.from_bytes(bytes(log["data"]), "big"),
            )
            for log in found["logs"]
            if str(log["address"]).lower() == asset
            and len(log["topics"]) == 3
            and bytes(log["topics"][0]).hex() == _TRANSFER
        ]

    def paid(self, tx_hash: str, *, sender: str, receiver: str, value: int) -> bool:
        """Did ``tx_hash`` move exactly ``value`` of the token from ``sender`` to
        ``receiver`` (mined, succeeded)?"""
        moved = self.transfers_in(tx_hash) or []
        want = TokenTransfer(sender.lower(), receiver.lower(), value)
        return any(
            TokenTransfer(m.sender.lower(), m.receiver.lower(), m.value) == want for m in moved
        )

"""Permit2 ``permitWitnessTransferFrom`` with x402's ``upto`` witness: reading, hashing,
recovering.

x402's ``upto`` scheme (the payer signs a maximum, the facilitator settles the actual
amount) is Permit2's signature transfer.  The payer signs the EIP-712 struct

    PermitWitnessTransferFrom(TokenPermissions permitted, address spender, uint256 nonce,
                              uint256 deadline, Witness witness)
    TokenPermissions(address token, uint256 amount)
    Witness(address to, address facilitator, uint256 validAfter)

under Permit2's domain (name ``Permit2``, no version, the chain id and Permit2's address);
``spender`` is x402's upto proxy, the one contract allowed to pull the tokens, and the
witness binds the recipient and the one facilitator allowed to call the proxy.  The wire
form is x402's ``payload.permit2Authorization`` (integers as decimal strings).

Signatures follow :mod:`.eip3009`'s rules (65 bytes, ``v`` of 27 or 28, low ``s``): a
signature the official clients make passes, and anything a token's ``ecrecover`` would
refuse is refused.  Permit2 itself also takes EIP-2098 compact and high-``s`` signatures;
no official client makes them, and the sandbox refuses them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import attrs
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from .eip3009 import signature_bytes, typed_data_digest, typed_data_signer
from .token import SANDBOX_TOKEN

__all__ = [
    "PERMIT2_ADDRESS",
    "UPTO_PROXY_ADDRESS",
    "MalformedPermit",
    "PermitWitnessTransfer",
    "recover_signer",
    "transaction_hash",
    "typed_data",
]

#: Permit2, at the same address on every EVM chain (CREATE2).
PERMIT2_ADDRESS = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
#: x402's ``x402UptoPermit2Proxy``: the ``spender`` every upto authorization names.
UPTO_PROXY_ADDRESS = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_UINT = re.compile(r"[0-9]{1,78}")
_UINT256_MAX = 2**256 - 1
_ZERO_ADDRESS = "0x" + "0" * 40

_TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "PermitWitnessTransferFrom": [
        {"name": "permitted", "type": "TokenPermissions"},
        {"name": "spender", "type": "address"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"},
        {"name": "witness", "type": "Witness"},
    ],
    "TokenPermissions": [
        {"name": "token", "type": "address"},
        {"name": "amount", "type": "uint256"},
    ],
    "Witness": [
        {"name": "to", "type": "address"},
        {"name": "facilitator", "type": "address"},
        {"name": "validAfter", "type": "uint256"},
    ],
}


class MalformedPermit(ValueError):
    """The authorization is not something the upto proxy could even be called with."""


@attrs.frozen(kw_only=True)
class PermitWitnessTransfer:
    """One upto authorization, normalized: addresses EIP-55 checksummed, integers ints.

    ``amount`` is the permitted maximum; what moves is chosen at settlement (at most it).
    """

    from_address: str
    token: str
    amount: int
    spender: str
    nonce: int
    deadline: int
    to: str
    facilitator: str
    valid_after: int

    @property
    def nonce_key(self) -> str:
        """The nonce as the chain stores it: 0x-prefixed 32 bytes of lowercase hex."""
        return f"0x{self.nonce:064x}"

    @classmethod
    def from_json(cls, raw: object) -> PermitWitnessTransfer:
        """Read x402's ``payload.permit2Authorization`` object."""
        if not isinstance(raw, Mapping):
            raise MalformedPermit("permit2Authorization must be an object")
        permitted = _mapping(raw, "permitted")
        witness = _mapping(raw, "witness")
        return cls(
            from_address=_address(raw, "from", "from"),
            token=_address(permitted, "token", "permitted.token"),
            amount=_uint(permitted, "amount", "permitted.amount"),
            spender=_address(raw, "spender", "spender"),
            nonce=_uint(raw, "nonce", "nonce"),
            deadline=_uint(raw, "deadline", "deadline"),
            to=_address(witness, "to", "witness.to"),
            facilitator=_address(witness, "facilitator", "witness.facilitator"),
            valid_after=_uint(witness, "validAfter", "witness.validAfter"),
        )

    def to_json(self) -> dict[str, Any]:
        """x402's wire form (every integer a decimal string)."""
        return {
            "from": self.from_address,
            "permitted": {"token": self.token, "amount": str(self.amount)},
            "spender": self.spender,
            "nonce": str(self.nonce),
            "deadline": str(self.deadline),
            "witness": {
                "to": self.to,
                "facilitator": self.facilitator,
                "validAfter": str(self.valid_after),
            },
        }


def _mapping(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if not isinstance(value, Mapping):
        raise MalformedPermit(f"permit2Authorization.{key} must be an object")
    return value


def _address(raw: Mapping[str, Any], key: str, path: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise MalformedPermit(f"permit2Authorization.{path} must be a 0x-prefixed 20-byte address")
    if value.lower() == _ZERO_ADDRESS:  # the proxy reverts InvalidOwner / InvalidDestination
        raise MalformedPermit(f"permit2Authorization.{path} must not be the zero address")
    return str(to_checksum_address(value))


def _uint(raw: Mapping[str, Any], key: str, path: str) -> int:
    value = raw.get(key)
    if isinstance(value, str) and _UINT.fullmatch(value):
        value = int(value)
    if type(value) is not int or not 0 <= value <= _UINT256_MAX:  # a bool is no uint256
        raise MalformedPermit(f"permit2Authorization.{path} must be a uint256 (decimal string)")
    return value


def typed_data(
    permit: PermitWitnessTransfer, chain_id: int = SANDBOX_TOKEN.chain_id
) -> dict[str, Any]:
    """The full EIP-712 message a payer signs (eth-account's ``full_message`` form)."""
    return {
        "types": _TYPES,
        "primaryType": "PermitWitnessTransferFrom",
        "domain": {"name": "Permit2", "chainId": chain_id, "verifyingContract": PERMIT2_ADDRESS},
        "message": {
            "permitted": {"token": permit.token, "amount": permit.amount},
            "spender": permit.spender,
            "nonce": permit.nonce,
            "deadline": permit.deadline,
            "witness": {
                "to": permit.to,
                "facilitator": permit.facilitator,
                "validAfter": permit.valid_after,
            },
        },
    }


def transaction_hash(permit: PermitWitnessTransfer) -> str:
    """The sandbox transaction hash of this authorization's settlement.

    Derived from the EIP-712 digest (every parameter, the chain, Permit2): an
    authorization settles at most once (its nonce), so the same authorization always names
    the same transaction, and re-encoded signature bytes do not change it.
    """
    digest = typed_data_digest(typed_data(permit))
    return "0x" + bytes(keccak(b"svc-sandbox-permitWitnessTransferFrom" + digest)).hex()


def recover_signer(permit: PermitWitnessTransfer, signature: object) -> str:
    """The checksummed address that signed ``permit`` on the sandbox chain; raises
    :class:`~.eip3009.InvalidSignature` for a signature ``ecrecover`` would refuse."""
    return _recover(permit, signature_bytes(signature))


@functools.lru_cache(maxsize=1024)
def _recover(permit: PermitWitnessTransfer, raw: bytes) -> str:
    """Remembered, as :mod:`.eip3009`'s is: verify and settle ask for the same recovery."""
    return typed_data_signer(typed_data(permit), raw)

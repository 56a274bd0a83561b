"""EIP-3009 ``transferWithAuthorization``: reading authorizations, hashing, recovering.

A payer authorizes a transfer by signing the EIP-712 struct

    TransferWithAuthorization(address from, address to, uint256 value,
                              uint256 validAfter, uint256 validBefore, bytes32 nonce)

under the token's domain (name, version, chainId, verifyingContract).  The token (USDC's
``FiatTokenV2``) recovers the signer with ``ecrecover`` and accepts only if it is ``from``.
Recovery here uses eth-account, the library x402's and pympp's Python clients sign with,
and applies the same rules as the token: a 65-byte signature, ``v`` of 27 or 28 and a
low ``s`` (EIP-2), so a signature the real chain would refuse is refused here too.

eth-account is imported when first needed, through :func:`_eth_account`: it ships with
the ``rails`` extra, so a server installed without it still starts (only the sandbox's
signature checks need it), and importing it has a side effect the server must undo.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import attrs
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from ..recursion import keeping_recursion_limit
from .token import SANDBOX_TOKEN, TokenIdentity

__all__ = [
    "Authorization",
    "InvalidSignature",
    "MalformedAuthorization",
    "recover_signer",
    "signature_bytes",
    "signing_digest",
    "transaction_hash",
    "typed_data",
    "typed_data_digest",
    "typed_data_signer",
]

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_NONCE = re.compile(r"0x[0-9a-fA-F]{64}")
_UINT = re.compile(r"[0-9]{1,78}")
_SIGNATURE = re.compile(r"0x[0-9a-fA-F]{130}")
_UINT256_MAX = 2**256 - 1
_ZERO_ADDRESS = "0x" + "0" * 40
#: Half the secp256k1 group order: EIP-2 (and USDC's ``ECRecover``) refuse larger ``s``.
_SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0

_TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ],
}


class MalformedAuthorization(ValueError):
    """The authorization is not something the token could even be called with."""


class InvalidSignature(ValueError):
    """The signature is malformed, or the token's ``ecrecover`` rules refuse it."""


@attrs.frozen(kw_only=True)
class Authorization:
    """One ``transferWithAuthorization`` call's parameters, normalized.

    Addresses are EIP-55 checksummed and the nonce lowercase, so that equal authorizations
    compare, hash and store equal however a client cased them.
    """

    from_address: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: str

    @classmethod
    def from_json(cls, raw: object) -> Authorization:
        """Read x402's ``payload.authorization`` object (MPP's payload has the same keys).

        Integers may come as decimal strings (the x402 wire form) or JSON integers.
        """
        if not isinstance(raw, Mapping):
            raise MalformedAuthorization("authorization must be an object")
        return cls(
            from_address=_address(raw, "from"),
            to=_address(raw, "to"),
            value=_uint(raw, "value"),
            valid_after=_uint(raw, "validAfter"),
            valid_before=_uint(raw, "validBefore"),
            nonce=_nonce(raw),
        )

    def to_json(self) -> dict[str, str]:
        """The x402 wire form (every integer a decimal string)."""
        return {
            "from": self.from_address,
            "to": self.to,
            "value": str(self.value),
            "validAfter": str(self.valid_after),
            "validBefore": str(self.valid_before),
            "nonce": self.nonce,
        }


def _address(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not _ADDRESS.fullmatch(value):
        raise MalformedAuthorization(f"authorization.{key} must be a 0x-prefixed 20-byte address")
    if value.lower() == _ZERO_ADDRESS:
        raise MalformedAuthorization(f"authorization.{key} must not be the zero address")
    return str(to_checksum_address(value))


def _uint(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key)
    if isinstance(value, str) and _UINT.fullmatch(value):
        value = int(value)
    if type(value) is not int or not 0 <= value <= _UINT256_MAX:  # a bool is no uint256
        raise MalformedAuthorization(f"authorization.{key} must be a uint256 (decimal string)")
    return value


def _nonce(raw: Mapping[str, Any]) -> str:
    value = raw.get("nonce")
    if not isinstance(value, str) or not _NONCE.fullmatch(value):
        raise MalformedAuthorization("authorization.nonce must be 0x-prefixed 32 bytes of hex")
    return value.lower()


def typed_data(auth: Authorization, token: TokenIdentity = SANDBOX_TOKEN) -> dict[str, Any]:
    """The full EIP-712 message a payer signs (eth-account's ``full_message`` form)."""
    return {
        "types": _TYPES,
        "primaryType": "TransferWithAuthorization",
        "domain": token.eip712_domain(),
        "message": {
            "from": auth.from_address,
            "to": auth.to,
            "value": auth.value,
            "validAfter": auth.valid_after,
            "validBefore": auth.valid_before,
            "nonce": bytes.fromhex(auth.nonce[2:]),
        },
    }


def _eth_account() -> tuple[Any, Any]:
    """``(Account, encode_typed_data)``, imported with the recursion limit kept as it was
    (:mod:`reference_server.recursion` says why)."""
    with keeping_recursion_limit():
        from eth_account import Account
        from eth_account.messages import encode_typed_data
    return Account, encode_typed_data


def typed_data_digest(full_message: dict[str, Any]) -> bytes:
    """``keccak256(0x1901 ‖ domainSeparator ‖ structHash)`` of an EIP-712 message
    (eth-account's ``full_message`` form): what a signature of it signs."""
    _, encode_typed_data = _eth_account()
    signable = encode_typed_data(full_message=full_message)
    return bytes(keccak(b"\x19" + bytes(signable.version) + signable.header + signable.body))


def signing_digest(auth: Authorization, token: TokenIdentity = SANDBOX_TOKEN) -> bytes:
    """What the signature of ``auth`` signs."""
    return typed_data_digest(typed_data(auth, token))


def transaction_hash(auth: Authorization, token: TokenIdentity = SANDBOX_TOKEN) -> str:
    """The sandbox transaction hash of this authorization.

    Derived from the signing digest, which covers every parameter, the chain and the
    token: the same authorization always gets the same hash (so a retried settle can be
    matched to its transaction), and it does not depend on the signature bytes, which a
    third party could re-encode without changing what was authorized.
    """
    digest = signing_digest(auth, token)
    return "0x" + bytes(keccak(b"svc-sandbox-transferWithAuthorization" + digest)).hex()


def recover_signer(
    auth: Authorization, signature: object, token: TokenIdentity = SANDBOX_TOKEN
) -> str:
    """The checksummed address that signed ``auth`` under ``token``'s domain.

    Raises :class:`InvalidSignature` for anything the token would refuse before comparing
    the signer with ``from`` (:func:`signature_bytes`).
    """
    return _recover(auth, signature_bytes(signature), token)


def signature_bytes(signature: object) -> bytes:
    """The 65 signature bytes, once they pass the rules a token's ``ecrecover`` applies:
    not 65 bytes (smart-wallet signatures need contract code the sandbox does not have),
    ``v`` not 27/28, or a high ``s`` raise :class:`InvalidSignature`."""
    if not isinstance(signature, str) or not _SIGNATURE.fullmatch(signature):
        raise InvalidSignature("signature must be 0x-prefixed 65 bytes of hex")
    raw = bytes.fromhex(signature[2:])
    s, v = int.from_bytes(raw[32:64], "big"), raw[64]
    if v not in (27, 28):
        raise InvalidSignature("signature v must be 27 or 28")
    if not 0 < s <= _SECP256K1_HALF_N:
        raise InvalidSignature("signature s is out of range (EIP-2 low-s)")
    return raw


def typed_data_signer(full_message: dict[str, Any], raw: bytes) -> str:
    """The checksummed address that signed an EIP-712 message (eth-account's
    ``full_message`` form) with the checked bytes ``raw``."""
    account, encode_typed_data = _eth_account()
    try:
        return str(
            account.recover_message(encode_typed_data(full_message=full_message), signature=raw)
        )
    except Exception as exc:  # eth-keys' own refusals (r out of range, no point)
        raise InvalidSignature(f"signature does not recover: {exc}") from None


@functools.lru_cache(maxsize=1024)
def _recover(auth: Authorization, raw: bytes, token: TokenIdentity) -> str:
    """The recovery itself, remembered: an ECDSA recovery is milliseconds of pure-Python
    CPU, and an x402 payment asks for the same one twice (verify, then settle).  A pure
    function of its arguments, so a remembered answer is the answer (refusals, raised,
    are not remembered)."""
    return typed_data_signer(typed_data(auth, token), raw)

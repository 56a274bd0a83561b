"""What the sandbox facilitator's schemes share: its address, refusals and the reading of
an x402 verify/settle body up to where the schemes part (:mod:`.facilitator` for
``exact``, :mod:`.upto` for ``upto``).

Both official clients treat any status but 200 as a transport failure, so every answer
about a payment is a 200 with ``isValid``/``success`` false and a reason
(:func:`invalid`, :func:`failed`), as real facilitators answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from .token import SANDBOX_TOKEN

__all__ = [
    "FACILITATOR_ADDRESS",
    "INVALID_NETWORK",
    "INVALID_PAYLOAD",
    "INVALID_REQUIREMENTS",
    "INVALID_VERSION",
    "UNSUPPORTED_SCHEME",
    "Refused",
    "asset_amount_pay_to",
    "claimed_payer",
    "failed",
    "invalid",
    "object_at",
    "settle_network",
]

#: Spec / SDK reason codes for what is wrong before the chain is asked.
INVALID_PAYLOAD = "invalid_payload"
INVALID_REQUIREMENTS = "invalid_payment_requirements"
INVALID_VERSION = "invalid_x402_version"
INVALID_NETWORK = "invalid_network"
UNSUPPORTED_SCHEME = "unsupported_scheme"

#: The address ``/supported`` names as the facilitator's signer, and the facilitator an
#: ``upto`` authorization must name in its witness.  The sandbox sends no transactions, so
#: no key stands behind it; it is fixed so that servers that record the signer see a
#: stable value.
FACILITATOR_ADDRESS = str(to_checksum_address(bytes(keccak(b"svc sandbox facilitator"))[-20:]))


class Refused(Exception):
    """The request is not a payment the sandbox can take; ``reason`` is the x402 code."""

    def __init__(self, reason: str, message: str, payer: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.payer = payer


def object_at(value: object, reason: str, what: str) -> Mapping[str, Any]:
    """``value``, which must be a JSON object (refused with ``reason`` otherwise)."""
    if not isinstance(value, Mapping):
        raise Refused(reason, f"{what} must be an object")
    return value


def _atomic(value: object, what: str) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 78:
        return int(value)
    raise Refused(INVALID_REQUIREMENTS, f"{what} must be an atomic amount (decimal string)")


def asset_amount_pay_to(requirements: Mapping[str, Any], version: int) -> tuple[int, str]:
    """The requirements' amount (atomic) and ``payTo``, once their asset is the sandbox
    token (the only asset the sandbox chain has)."""
    if not SANDBOX_TOKEN.is_token(requirements.get("asset")):
        raise Refused(
            INVALID_REQUIREMENTS,
            f"the sandbox chain has one token, USDC at {SANDBOX_TOKEN.address}; "
            f"asset {requirements.get('asset')!r} does not exist there",
        )
    amount = _atomic(
        requirements.get("amount" if version == 2 else "maxAmountRequired"),
        "paymentRequirements.amount" if version == 2 else "paymentRequirements.maxAmountRequired",
    )
    pay_to = requirements.get("payTo")
    if not isinstance(pay_to, str):
        raise Refused(INVALID_REQUIREMENTS, "paymentRequirements.payTo must be an address")
    return amount, pay_to


def settle_network(body: Mapping[str, Any]) -> str:
    """The network a settle answer names: the requirements', else the sandbox's."""
    requirements = body.get("paymentRequirements")
    network = requirements.get("network") if isinstance(requirements, Mapping) else None
    return network if isinstance(network, str) and network else SANDBOX_TOKEN.network


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def invalid(reason: str, message: str, payer: str | None) -> dict[str, Any]:
    """A ``/verify`` answer: not valid, and why."""
    return _drop_none(
        {"isValid": False, "invalidReason": reason, "invalidMessage": message, "payer": payer}
    )


def failed(reason: str, message: str, payer: str | None, network: str) -> dict[str, Any]:
    """A ``/settle`` answer: nothing settled, and why."""
    return _drop_none(
        {
            "success": False,
            "errorReason": reason,
            "errorMessage": message,
            "payer": payer,
            "transaction": "",
            "network": network,
        }
    )


def claimed_payer(body: Mapping[str, Any], authorization: str) -> str | None:
    """The payer a verify/settle body's ``payload.<authorization>.from`` claims, if it
    can be read: a refusal names it even when the rest of the body is malformed."""
    payment = body.get("paymentPayload")
    inner = payment.get("payload") if isinstance(payment, Mapping) else None
    auth = inner.get(authorization) if isinstance(inner, Mapping) else None
    payer = auth.get("from") if isinstance(auth, Mapping) else None
    return payer if isinstance(payer, str) else None

"""What the sandbox routes answer, as shapes for the OpenAPI document.

The sandbox is the server's own test chain, not part of the SDK, so its answers are not
``svc`` models; the x402 facilitator's follow x402's field names (camelCase).  The routes
build these dicts themselves; the document's schemas come from these classes, and the
schemathesis run checks the two agree.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

__all__ = [
    "FacilitatorSettlement",
    "FacilitatorSupport",
    "FacilitatorVerdict",
    "SandboxBalance",
    "SandboxMint",
    "SandboxTransaction",
]


@attrs.frozen(kw_only=True)
class SandboxBalance:
    """An address's sandbox USDC: ``balance`` in dollars, ``balance_atomic`` in units."""

    address: str
    balance: Decimal
    balance_atomic: str
    network: str
    asset: str
    symbol: str
    decimals: int


@attrs.frozen(kw_only=True)
class SandboxMint(SandboxBalance):
    """A faucet mint: how much, the new balance, and the minting transaction."""

    amount: Decimal
    transaction: str
    block_number: int


@attrs.frozen(kw_only=True)
class SandboxTransaction:
    """One sandbox transaction: a mint or a settled authorization (``from``, ``to``)."""

    hash: str
    kind: str
    to: str
    value: str
    block_number: int
    timestamp: int
    network: str
    asset: str
    nonce: str | None = None


@attrs.frozen(kw_only=True)
class FacilitatorSupport:
    """x402 ``/supported``: the kinds this facilitator settles, and its signers."""

    kinds: list[dict[str, Any]]
    extensions: list[Any]
    signers: dict[str, Any]


@attrs.frozen(kw_only=True)
class FacilitatorVerdict:
    """x402 ``/verify``: whether the payment would settle now (and why not)."""

    isValid: bool
    payer: str | None = None
    invalidReason: str | None = None
    invalidMessage: str | None = None


@attrs.frozen(kw_only=True)
class FacilitatorSettlement:
    """x402 ``/settle``: the settlement's transaction, or why it failed."""

    success: bool
    network: str
    transaction: str
    payer: str | None = None
    amount: str | None = None
    errorReason: str | None = None
    errorMessage: str | None = None

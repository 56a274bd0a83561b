"""What a gate offers on the open rails: token, recipient, settlement, who settles.

Decided from the seller (``PATCH /sellers/me/payments``) and the environment alone, with
no SDK involved, so that a gate that offers nothing never loads one:

* the seller has not enabled payments: nothing;
* ``payout_wallet_address`` set: ``direct_wallet`` — the payer's USDC goes to that wallet
  and the service credits nothing; otherwise ``processor_deposit`` — it goes to the
  environment's deposit address and the seller's balance is credited, less the fee;
* ``test`` settles on the sandbox chain (in this database), with Base Sepolia USDC's
  identity, deposits to :data:`TEST_DEPOSIT_ADDRESS`;
* ``live`` settles through ``Settings.live_facilitator_url`` with the configured token and
  deposits to ``Settings.live_deposit_address``; without a facilitator (or, for
  ``processor_deposit``, a deposit address) live gates offer no open rail: nothing in
  ``test`` can stand in for them.
"""

from __future__ import annotations

from typing import Any

import attrs
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from ...sandbox.token import SANDBOX_TOKEN
from ...sandbox.x402_wire import FACILITATOR_ADDRESS
from ...settings import Settings

__all__ = [
    "DIRECT_WALLET",
    "PROCESSOR_DEPOSIT",
    "PROTOCOLS",
    "TEST_DEPOSIT_ADDRESS",
    "Asset",
    "RailTerms",
    "deposit_terms",
    "sold_on",
    "terms_for",
    "upto_facilitator",
]

PROCESSOR_DEPOSIT = "processor_deposit"
DIRECT_WALLET = "direct_wallet"
#: The open rails a gate can speak, as ``rail`` values of receipts and events.
PROTOCOLS = ("x402", "mpp")

#: Where ``test`` payments settled ``processor_deposit`` land on the sandbox chain.  No
#: key stands behind it (the sandbox never spends from it); fixed so that every server
#: process, and the docs, name the same address.
TEST_DEPOSIT_ADDRESS = str(to_checksum_address(bytes(keccak(b"svc sandbox deposit"))[-20:]))


@attrs.frozen(kw_only=True)
class Asset:
    """An EIP-3009 token: what the payer signs a ``TransferWithAuthorization`` for."""

    address: str
    chain_id: int
    #: Must be 6, like the service's micro-units (USDC): one atomic unit is one micro.
    decimals: int
    #: EIP-712 domain the token verifies signatures under.
    name: str
    version: str

    @property
    def network(self) -> str:
        """CAIP-2 id (``eip155:84532``), as x402 v2 and receipts name it."""
        return f"eip155:{self.chain_id}"


SANDBOX_ASSET = Asset(
    address=SANDBOX_TOKEN.address,
    chain_id=SANDBOX_TOKEN.chain_id,
    decimals=SANDBOX_TOKEN.decimals,
    name=SANDBOX_TOKEN.name,
    version=SANDBOX_TOKEN.version,
)


@attrs.frozen(kw_only=True)
class RailTerms:
    """One gate's open-rail offer."""

    environment: str
    asset: Asset
    recipient: str
    settlement: str
    #: ``live``: the x402 facilitator that verifies and settles; ``test``: ``None``
    #: (the sandbox chain settles in the service's own transaction).
    facilitator_url: str | None
    #: The protocols offered: ``x402`` and/or ``mpp``.
    protocols: frozenset[str]

    @property
    def sandbox(self) -> bool:
        return self.facilitator_url is None


def terms_for(settings: Settings, seller: Any) -> RailTerms | None:
    """The offer of ``seller``'s gates (a ``sellers`` row), or ``None`` for none."""
    protocols = frozenset(
        name
        for name, enabled in (("x402", seller.x402_enabled), ("mpp", seller.mpp_enabled))
        if enabled
    )
    if not protocols:
        return None
    wallet = seller.payout_wallet_address
    return _terms(
        settings,
        seller.environment,
        recipient=wallet,
        settlement=DIRECT_WALLET if wallet else PROCESSOR_DEPOSIT,
        protocols=protocols,
    )


def deposit_terms(settings: Settings, environment: str) -> RailTerms | None:
    """What a payment to the service itself (an owner's top-up) offers: both rails, to the
    environment's deposit address; ``None`` in ``live`` without a facilitator or one."""
    return _terms(
        settings,
        environment,
        recipient=None,
        settlement=PROCESSOR_DEPOSIT,
        protocols=frozenset(PROTOCOLS),
    )


def _terms(
    settings: Settings,
    environment: str,
    *,
    recipient: str | None,
    settlement: str,
    protocols: frozenset[str],
) -> RailTerms | None:
    """The offer paying ``recipient`` (``None``: the environment's deposit address)."""
    if environment == "test":
        return RailTerms(
            environment="test",
            asset=SANDBOX_ASSET,
            recipient=recipient or TEST_DEPOSIT_ADDRESS,
            settlement=settlement,
            facilitator_url=None,
            protocols=protocols,
        )
    recipient = recipient or settings.live_deposit_address
    if not settings.live_facilitator_url or not recipient:
        return None
    return RailTerms(
        environment="live",
        asset=Asset(
            address=settings.live_asset_address,
            chain_id=settings.live_chain_id,
            decimals=6,
            name=settings.live_asset_name,
            version=settings.live_asset_version,
        ),
        recipient=recipient,
        settlement=settlement,
        facilitator_url=settings.live_facilitator_url,
        protocols=protocols,
    )


def upto_facilitator(settings: Settings, terms: RailTerms) -> str | None:
    """The account that settles x402 ``upto`` under ``terms`` (a payer's Permit2 witness
    names it), or ``None``: no ``upto`` (x402 not offered, or live without one set)."""
    if "x402" not in terms.protocols:
        return None
    return FACILITATOR_ADDRESS if terms.sandbox else settings.live_upto_facilitator_address


def sold_on(settings: Settings, terms: RailTerms, resource: Any) -> frozenset[str]:
    """The open rails ``resource`` is sold on under ``terms``: a fixed price on every one
    offered; a metered resource on x402 ``upto``, and at its ``fallback_amount`` (if it
    has one) on every one offered."""
    if resource.pricing != "metered" or resource.fallback_amount_micros is not None:
        return terms.protocols
    return frozenset({"x402"}) if upto_facilitator(settings, terms) else frozenset()

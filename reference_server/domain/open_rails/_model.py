"""The values the open rails hand around: the gate, what a credential became, the error."""

from __future__ import annotations

from typing import Any

import attrs

from svc import GateRedemption, ReceiptVerification

__all__ = ["FixedPrice", "Gate", "HoldNotFound", "Redemption", "Settled", "SettlementUnavailable"]


class SettlementUnavailable(Exception):
    """The credential could not be settled now, and its outcome may be unknown (a
    facilitator failed after broadcasting, the database failed after the chain moved):
    answer 503, never a fresh challenge, which would invite the payer to pay again."""


class FixedPrice(ValueError):
    """``units`` were reported for a claim of a fixed-price resource: nothing is settled
    (the hold waits for a settle without them, or a release)."""


class HoldNotFound(LookupError):
    """No such hold: unknown, another seller's, or already settled, released or expired."""


@attrs.frozen(kw_only=True)
class Gate:
    """A resource on sale at a gate, with its seller (database rows), and the realm its
    MPP challenges name: the service's public host."""

    resource: Any
    seller: Any
    realm: str


@attrs.frozen(kw_only=True)
class Redemption:
    """What became of an open-rail credential presented at a gate."""

    paid: bool
    #: The credential's protocol: ``x402`` or ``mpp``.
    rail: str | None = None
    receipt_id: str | None = None
    verification: ReceiptVerification | None = None
    #: Paid: ``Payment-Receipt`` / ``PAYMENT-RESPONSE``; refused: the 402's challenge
    #: (empty after a replay).
    headers: list[tuple[str, str]] = attrs.field(factory=list)
    #: Refused: ``receipt_refused`` or ``receipt_malformed``, and why; or ``released``:
    #: a metered ``upto`` hold settled with zero units (no usage was reported), released
    #: with nothing charged and no ``payment.failed``.
    reason: str | None = None
    message: str | None = None
    payer: str | None = None
    #: Claimed, not settled (:func:`..claim`): the hold to settle or release.
    claim: str | None = None

    def model(self) -> GateRedemption:
        """The ``POST /gates/redeem`` answer."""
        return GateRedemption(
            paid=self.paid,
            rail=self.rail,
            verification=self.verification,
            headers=list(self.headers),
            reason=self.reason,
            message=self.message,
            claim=self.claim,
        )


@attrs.frozen(kw_only=True)
class Settled:
    """A payment to the service that moved on chain: what its booking records."""

    rail: str
    tx_hash: str
    payer: str | None
    #: CAIP-2 id of the chain it settled on.
    network: str

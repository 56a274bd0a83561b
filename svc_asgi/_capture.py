"""A metered resource paid on the ledger rail: ``POST /pay`` holds its maximum and the
receipt (``X-Svc-Receipt``) stays ``authorized`` until the gate reports what the answer
used.  :class:`ReceiptCapture` is the :class:`~svc_asgi.HoldingRail` such a receipt is
settled through, so the gate settles it after the body exactly as it settles an open-rail
claim: capture the units, or capture none (release) when the answer failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from svc.money import MAX_UNITS

from ._backend import GateBackend
from ._offer import Offer
from ._rails import RailRedemption, RailRequest

__all__ = ["ReceiptCapture"]


class ReceiptCapture:
    """Settles an authorized metered receipt (the claim is its id) with the backend's
    :meth:`~svc_asgi.GateBackend.capture`; it takes no credential of its own."""

    name = "rill"

    def __init__(self, backend: GateBackend) -> None:
        self.backend = backend

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        return ()

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        return None

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        """Capture ``units``; ``None`` (a gate that does not meter) captures the maximum,
        as a card captured without an amount."""
        captured = await self.backend.capture(claim, MAX_UNITS if units is None else units)
        return RailRedemption(verification=captured)

    async def release(self, claim: str, *, reason: str, status: int | None) -> None:
        await self.backend.capture(claim, 0)

"""``ServiceRails``: x402 and MPP at a seller's own gate, challenged and settled by the service.

The seller's app holds no keys and imports neither x402 nor MPP: the service issues the
challenges (``POST /gates/challenge``), verifies and claims the credentials (``POST
/gates/redeem``), and settles them once the app's answer succeeded (``POST
/gates/settle``) or releases them when it failed (``POST /gates/release``), with the
seller's key, under the seller's payment settings
(``PATCH /sellers/me/payments``).  So enabling payments is all a seller does for every
``svc_asgi`` gate to answer both protocols; until then the challenge is empty and the
402 is the service's own.

Only the credential headers leave the app (``PAYMENT-SIGNATURE`` and an ``Authorization``
of MPP's ``Payment`` scheme): the app's own ``Authorization`` (a login) and cookies never
do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import svc
from svc.receipts import MalformedReceipt, rail_credentials

from ._backend import unavailable_when_transient
from ._offer import Offer
from ._rails import RailRedemption, RailRequest

__all__ = ["ServiceRails"]


class ServiceRails:
    """:class:`~svc_asgi.PaymentRail` for x402 and MPP over the service's API.

    ``client`` is an :class:`svc.AsyncClient` with the seller key (the one the gate's
    :class:`~svc_asgi.ServiceBackend` uses).  :attr:`Payment.source` of a payment it
    settles is the protocol that paid, ``x402`` or ``mpp``.
    """

    name = "service"

    def __init__(self, client: svc.AsyncClient) -> None:
        self.client = client

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        with unavailable_when_transient():
            answer = await self.client.gates.challenge(
                offer.resource_id, method=request.method, url=request.url
            )
        return answer.headers

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        credentials = rail_credentials(headers)
        if not credentials:
            return None
        try:
            with unavailable_when_transient():
                answer = await self.client.gates.redeem(
                    offer.resource_id, method=request.method, url=request.url, headers=credentials
                )
        except svc.BadRequestError as exc:  # e.g. a credential header too long to be one
            raise MalformedReceipt(exc.message) from exc
        return RailRedemption.from_answer(answer)

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        try:
            with unavailable_when_transient():
                answer = await self.client.gates.settle(claim, units)
        except svc.NotFoundError:  # expired (so released) before the answer came
            gone = "the claim expired before the answer came; nothing was charged"
            refused = svc.ReceiptVerification(valid=False, receipt_id="", reason=gone)
            return RailRedemption(verification=refused, source="service")
        return RailRedemption.from_answer(answer)

    async def release(self, claim: str, *, reason: str, status: int | None) -> None:
        await self.client.gates.release(claim, status=status, reason=reason)

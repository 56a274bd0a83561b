"""Where a gate gets its answers: the :class:`GateBackend` protocol and its HTTP version.

The gate's decisions (see ``_core``) need two questions answered: *is this receipt good
for this resource?* and *what does this resource cost, and where is it paid?* (and the
keys a signed receipt token is checked with offline); and, for a
metered receipt, one request made: *charge the units this answer used*.  A seller's app
asks the service over HTTP with its seller key (:class:`ServiceBackend`); the reference
server's hosted gates ask their own database (``reference_server.routes.gates.backend``)
and never make an HTTP request to themselves.  Both sit behind this one protocol, so the
decision logic is shared rather than copied.

Errors are part of the contract, because they decide between "fail closed" and "fail
open": raise :class:`BackendUnavailable` when the answer cannot be had *right now*
(network, timeouts, 5xx, 429); anything else raised means the gate is misconfigured (a
revoked seller key, a resource id that is not the seller's) and always fails closed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import svc
from svc import Jwks, Receipt, ReceiptVerification, Resource

__all__ = ["BackendUnavailable", "GateBackend", "ServiceBackend", "captured_verification"]


class BackendUnavailable(Exception):
    """The backend cannot answer now; retrying later may work."""


@contextmanager
def unavailable_when_transient() -> Iterator[None]:
    """A service failure that means "not now" rather than "misconfigured" (no answer, a
    5xx, a 429) raised as :class:`BackendUnavailable`."""
    try:
        yield
    except (svc.APIConnectionError, svc.ServerError, svc.RateLimitError) as exc:
        raise BackendUnavailable(f"the payment service did not answer: {exc}") from exc


def captured_verification(receipt: Receipt) -> ReceiptVerification:
    """A captured receipt as the gate reads a verification: valid when something was
    charged; a released one (no usage) is not, and says so."""
    if receipt.status != "settled":
        why = "no usage was reported: the authorization was released, nothing was charged"
        return ReceiptVerification(valid=False, receipt_id=receipt.id, reason=why)
    return ReceiptVerification(
        valid=True,
        receipt_id=receipt.id,
        resource_id=receipt.resource_id,
        amount=receipt.amount,
        rail=receipt.rail,
        environment=receipt.environment,
        created_at=receipt.created_at,
    )


@runtime_checkable
class GateBackend(Protocol):
    """What a gate asks, and the capture it makes.  Implementations must be safe to call
    concurrently."""

    async def verify(self, receipt_id: str, resource_id: str | None) -> ReceiptVerification:
        """``POST /access/verify``: is ``receipt_id`` valid (for ``resource_id``, if given)?

        An unknown or mismatched receipt is ``valid=False`` with a ``reason``, not an error.
        """
        ...

    async def describe(self, resource_id: str) -> Resource:
        """The resource: price, ``gate_url``, ``pay_url``, ``active``, metadata."""
        ...

    async def capture(self, receipt_id: str, units: int) -> ReceiptVerification:
        """``POST /receipts/{id}/capture``: charge ``units`` of an authorized metered
        receipt (0 releases it); the captured receipt, or ``valid=False`` with a ``reason``
        when it was captured or released already."""
        ...

    async def jwks(self) -> Jwks:
        """``GET /.well-known/jwks.json``: the keys signed receipt tokens are checked with."""
        ...


class ServiceBackend:
    """:class:`GateBackend` over the service's API, with the seller's own client.

    The seller key binds every answer to the seller: ``/access/verify`` only confirms
    receipts for the seller's resources and ``GET /resources/:id`` only shows the
    seller's own, so a misconfigured price table fails closed instead of selling someone
    else's resource.
    """

    def __init__(self, client: svc.AsyncClient) -> None:
        self.client = client

    async def verify(self, receipt_id: str, resource_id: str | None) -> ReceiptVerification:
        with unavailable_when_transient():
            return await self.client.access.verify(receipt_id, resource_id)

    async def describe(self, resource_id: str) -> Resource:
        with unavailable_when_transient():
            return await self.client.resources.get(resource_id)

    async def jwks(self) -> Jwks:
        with unavailable_when_transient():
            return await self.client.jwks()

    async def capture(self, receipt_id: str, units: int) -> ReceiptVerification:
        try:
            with unavailable_when_transient():
                receipt = await self.client.receipts.capture(receipt_id, units=units)
        except (svc.ConflictError, svc.NotFoundError) as exc:
            return ReceiptVerification(valid=False, receipt_id=receipt_id, reason=exc.message)
        return captured_verification(receipt)

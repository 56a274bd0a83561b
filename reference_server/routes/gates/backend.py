"""The hosted gates' :class:`svc_asgi.GateBackend` and open rails, from the database.

A seller's app asks the service over HTTP whether a receipt is good
(:class:`svc_asgi.ServiceBackend`); the service's own gates (each resource's ``gate_url``
and ``/demo/echo``) ask the same questions of the database directly, through the same
domain functions ``POST /access/verify`` uses, so a hosted gate never makes an HTTP
request to itself and both paths give the same verdicts by construction.

Their open rails likewise: :class:`DatabaseRails` calls the same domain code
(:mod:`reference_server.domain.open_rails`) that ``POST /gates/challenge``, ``/gates/redeem``,
``/gates/settle`` and ``/gates/release`` serve a seller's ``svc_asgi`` gate with: a
credential is verified and claimed first, settled once the answer succeeded.

Database work is blocking SQLAlchemy, so it runs in a worker thread.  A database that
cannot be reached is :class:`svc_asgi.BackendUnavailable` (the gate answers 503); any
other failure is a bug and fails closed as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import anyio.to_thread
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from svc import Jwks, ReceiptVerification, Resource
from svc.receipts import rail_credentials
from svc_asgi import (
    BackendUnavailable,
    Offer,
    RailRedemption,
    RailRequest,
    captured_verification,
)

from ... import receipt_tokens
from ...context import ServerContext
from ...domain import metered, open_rails
from ...domain.errors import DomainError
from ...domain.events import writing
from ...domain.payments import verify_receipt
from ...domain.resources import find_any_resource, resource_model
from ...store import tables as t

__all__ = [
    "DatabaseGateBackend",
    "DatabaseRails",
    "find_gate_by_short_id",
]


def find_gate_by_short_id(ctx: ServerContext, short_id: str, realm: str) -> open_rails.Gate | None:
    """The resource a ``gate_url`` names and its seller (for the gate's open rails)."""
    r = t.resources
    with ctx.db.read() as conn:
        resource_id = conn.execute(select(r.c.id).where(r.c.short_id == short_id)).scalar()
        if resource_id is None:
            return None
        return open_rails.load_gate(conn, resource_id, realm=realm)


class DatabaseGateBackend:
    """``verify`` and ``describe`` straight from the database.

    ``public_url`` is the base of the ``gate_url``/``pay_url`` it reports (the request's
    own address when the server has no ``SVC_PUBLIC_URL``).  ``known`` resources are
    answered without a query (the hosted gate has just read its resource).
    """

    def __init__(
        self,
        ctx: ServerContext,
        public_url: str,
        known: Iterable[Resource] = (),
        *,
        request_id: str = "",
    ) -> None:
        self.ctx = ctx
        self.public_url = public_url
        self.request_id = request_id
        self._known = {resource.id: resource for resource in known}

    async def verify(self, receipt_id: str, resource_id: str | None) -> ReceiptVerification:
        return await anyio.to_thread.run_sync(self._verify, receipt_id, resource_id)

    async def describe(self, resource_id: str) -> Resource:
        known = self._known.get(resource_id)
        if known is not None:
            return known
        return await anyio.to_thread.run_sync(self._describe, resource_id)

    def _verify(self, receipt_id: str, resource_id: str | None) -> ReceiptVerification:
        try:
            with self.ctx.db.read() as conn:
                return verify_receipt(conn, receipt_id, resource_id=resource_id, seller_id=None)
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc

    async def jwks(self) -> Jwks:
        keys = await anyio.to_thread.run_sync(receipt_tokens.published, self.ctx, self.ctx.now())
        return Jwks(keys=keys["keys"])

    async def capture(self, receipt_id: str, units: int) -> ReceiptVerification:
        return await anyio.to_thread.run_sync(self._capture, receipt_id, units)

    def _capture(self, receipt_id: str, units: int) -> ReceiptVerification:
        """Capture as ``POST /receipts/{id}/capture`` does, as the seller of a resource this
        gate sells (the query names them: a receipt for anything else is not found here)."""
        ctx = self.ctx
        r = t.receipts.c
        mine = [r.id == receipt_id]
        if self._known:
            mine.append(r.resource_id.in_(list(self._known)))
        try:
            with writing(ctx.db, ctx.notify_new_events) as conn:
                row = conn.execute(select(r.seller_id, r.environment).where(*mine)).first()
                if row is None or row.seller_id is None:
                    raise DomainError("not_found", f"No receipt {receipt_id}.")
                receipt = metered.capture(
                    conn,
                    receipt_id=receipt_id,
                    seller_id=row.seller_id,
                    environment=row.environment,
                    units=units,
                    fee_bps=ctx.settings.platform_fee_bps,
                    request_id=self.request_id,
                    now=ctx.now(),
                )
        except DomainError as refused:
            return ReceiptVerification(valid=False, receipt_id=receipt_id, reason=refused.message)
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc
        return captured_verification(receipt)

    def _describe(self, resource_id: str) -> Resource:
        try:
            with self.ctx.db.read() as conn:
                row = find_any_resource(conn, resource_id)
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc
        if row is None:
            raise LookupError(f"no resource {resource_id}")
        return resource_model(row, self.public_url)


class DatabaseRails:
    """x402 and MPP at a hosted gate: :class:`svc_asgi.PaymentRail` over the domain code.

    The same answers a seller's ``svc_asgi`` gate gets from ``POST /gates/challenge`` and
    ``POST /gates/redeem`` (:class:`svc_asgi.ServiceRails`), without an HTTP request to
    itself.  ``request_id`` is the hosted gate request's, recorded with the payment.
    """

    name = "service"

    def __init__(self, ctx: ServerContext, gate: open_rails.Gate, request_id: str) -> None:
        self.ctx = ctx
        self.gate = gate
        self.request_id = request_id

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        return await open_rails.challenge(self.ctx, self.gate, request)

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        if not rail_credentials(headers):
            return None
        try:
            redemption = await open_rails.claim(
                self.ctx, self.gate, request, headers, request_id=self.request_id
            )
        except open_rails.SettlementUnavailable as exc:
            raise BackendUnavailable(f"the payment could not be verified now: {exc}") from exc
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc
        return RailRedemption.from_answer(redemption.model())

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        """Settle ``claim``; ``units``: what the answer used of a metered resource."""
        try:
            redemption = await open_rails.settle(
                self.ctx, claim, request_id=self.request_id, units=units
            )
        except open_rails.HoldNotFound:  # expired, hence released: nothing moved
            gone = "the claim expired before the answer came; nothing was charged"
            return RailRedemption(
                verification=ReceiptVerification(valid=False, receipt_id="", reason=gone)
            )
        except open_rails.SettlementUnavailable as exc:
            raise BackendUnavailable(f"the payment could not be settled now: {exc}") from exc
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc
        return RailRedemption.from_answer(redemption.model())

    async def release(self, claim: str, *, reason: str, status: int | None) -> None:
        await open_rails.release(
            self.ctx,
            claim,
            reason=reason,
            message=_released_because(reason, status),
            status=status,
            request_id=self.request_id,
        )


def _released_because(reason: str, status: int | None) -> str:
    """``payment.failed``'s message for a released claim."""
    if reason == "answer_failed" and status is not None:
        return f"the answer failed with status {status}; the payment was released, nothing charged"
    if reason == "answer_failed":  # e.g. an MCP tool call answered with isError
        return "the answer was an error result; the payment was released, nothing charged"
    return "no answer came back; the payment was released, nothing charged"

"""The hosted gates' :class:`svc_asgi.GateBackend`: answers from the server's database.

A seller's app asks the service over HTTP whether a receipt is good
(:class:`svc_asgi.ServiceBackend`); the service's own gates (each resource's ``gate_url``
and ``/demo/echo``) ask the same questions of the database directly, through the same
domain functions ``POST /access/verify`` uses, so a hosted gate never makes an HTTP
request to itself and both paths give the same verdicts by construction.

Database work is blocking SQLAlchemy, so it runs in a worker thread.  A database that
cannot be reached is :class:`svc_asgi.BackendUnavailable` (the gate answers 503); any
other failure is a bug and fails closed as well.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio.to_thread
from sqlalchemy import Row, select
from sqlalchemy.exc import OperationalError

from svc import ReceiptVerification, Resource
from svc_asgi import BackendUnavailable

from .context import ServerContext
from .domain.payments import verify_receipt
from .domain.resources import find_any_resource, resource_model
from .store import tables as t

__all__ = ["DatabaseGateBackend", "find_resource_by_short_id"]


def find_resource_by_short_id(ctx: ServerContext, short_id: str) -> Row[Any] | None:
    """The resource a ``gate_url`` names, whoever sells it (gates are public)."""
    r = t.resources
    with ctx.db.read() as conn:
        return conn.execute(select(r).where(r.c.short_id == short_id)).first()


class DatabaseGateBackend:
    """``verify`` and ``describe`` straight from the database.

    ``public_url`` is the base of the ``gate_url``/``pay_url`` it reports (the request's
    own address when the server has no ``SVC_PUBLIC_URL``).  ``known`` resources are
    answered without a query (the hosted gate has just read its resource).
    """

    def __init__(self, ctx: ServerContext, public_url: str, known: Iterable[Resource] = ()) -> None:
        self.ctx = ctx
        self.public_url = public_url
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

    def _describe(self, resource_id: str) -> Resource:
        try:
            with self.ctx.db.read() as conn:
                row = find_any_resource(conn, resource_id)
        except OperationalError as exc:
            raise BackendUnavailable(f"the database did not answer: {exc.orig}") from exc
        if row is None:
            raise LookupError(f"no resource {resource_id}")
        return resource_model(row, self.public_url)

"""Receipts: ``POST /access/verify`` and the demonstration gate ``GET /demo/echo``."""

from __future__ import annotations

import anyio.to_thread
from starlette.responses import Response

from svc import ReceiptVerification
from svc.bodies import VerifyReceipt
from svc_asgi import GateCore, Paid, Refusal

from ..api.auth import Role
from ..api.endpoint import Call, Endpoint
from ..api.responses import Reply, json_response
from ..context import ServerContext
from ..domain import payments
from ..domain.demo_gate import DEMO_PATH
from ..gate_backend import DatabaseGateBackend
from ..invariant import InvariantError
from .gates import paid_headers, receipt_json, refusal_response

__all__ = ["DEMO_ENDPOINTS", "ENDPOINTS"]

_ECHOED_HEADERS = ("user-agent", "accept", "content-type", "x-svc-receipt")


def verify(call: Call) -> Reply:
    """Is this receipt valid (for this resource)?  Unknown receipts are ``valid: false``.

    Anyone holding a receipt id may ask; a seller key, when sent, also binds the answer to
    that seller's resources.
    """
    b = call.input(VerifyReceipt)
    seller_id = call.principal.seller_id if call.principal is not None else None
    return Reply(
        payments.verify_receipt(
            call.conn, b.receipt_id, resource_id=b.resource_id, seller_id=seller_id
        )
    )


async def echo(call: Call) -> Response:
    """Demonstration gate: 402 until a receipt for the demo resource is presented.

    Served by the same gate core as every hosted gate and ``svc_asgi.PaymentGate``.  The
    402 offers the demo resource of the requested environment (``X-Svc-Environment``,
    absent = ``live``); a receipt for either environment's demo resource unlocks it.
    """
    ctx: ServerContext = call.ctx
    request, request_id = call.request, call.request_id
    environment = call.environment
    demo = await anyio.to_thread.run_sync(ctx.demo_resources)
    core = GateCore(DatabaseGateBackend(ctx, call.public_url), cache_ttl=0)
    outcome = await core.check(demo[environment], request.headers, accepted=demo.values())
    if isinstance(outcome, Refusal):
        return refusal_response(outcome, request_id)
    if not isinstance(outcome, Paid):
        raise InvariantError("the demo gate fails closed")
    return json_response(
        {
            "ok": True,
            "echo": {
                "method": request.method,
                "path": DEMO_PATH,
                "query": dict(request.query_params),
                "headers": {h: request.headers[h] for h in _ECHOED_HEADERS if h in request.headers},
            },
            "receipt": receipt_json(outcome.payment),
            "request_id": request_id,
        },
        headers={**paid_headers(outcome), "Cache-Control": "no-store"},
    )


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/access/verify",
        handler=verify,
        auth=Role.SELLER,
        auth_optional=True,
        body=VerifyReceipt,
        response=ReceiptVerification,
    ),
]

#: ``/demo/echo``: a gate (it awaits the gate core), so apart from the JSON API.
DEMO_ENDPOINTS = [
    Endpoint(
        method="GET",
        path=DEMO_PATH,
        handler=echo,
        summary="Demonstration gate, unlocked with X-Svc-Receipt (pay its resource with "
        "POST /pay).",
        errors=(
            "payment_required",
            "resource_inactive",
            "payment_service_unavailable",
            "gate_misconfigured",
        ),
    )
]

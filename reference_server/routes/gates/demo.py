"""The demonstration gate ``GET /demo/echo``: 402 until its demo resource is paid."""

from __future__ import annotations

import anyio.to_thread
from starlette.responses import Response

from svc_asgi import GateCore, Paid, Refusal

from ...context import ServerContext
from ...domain.demo_gate import DEMO_PATH
from ...invariant import InvariantError
from ...web.endpoint import Call, Contract, Endpoint, Flow
from ...web.responses import json_response
from .backend import DatabaseGateBackend
from .hosted import GATE_REFUSALS, paid_headers, receipt_json, refusal_response

__all__ = ["ENDPOINTS"]

_ECHOED_HEADERS = ("user-agent", "accept", "content-type", "x-svc-receipt")


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


#: ``/demo/echo``: a gate (it awaits the gate core), so apart from the JSON API.
ENDPOINTS = [
    Endpoint(
        method="GET",
        path=DEMO_PATH,
        handler=echo,
        run=Flow(),
        contract=Contract(
            gate=True,
            summary="Demonstration gate, unlocked with X-Svc-Receipt (pay its resource with "
            "POST /pay).",
            errors=(*GATE_REFUSALS, "invalid_environment"),
        ),
    )
]

"""Liveness and readiness probes.

They bypass the API pipeline on purpose: a probe must answer even when the database (and
so authentication, idempotency...) is down; ``/ready`` exists to say exactly that.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..api.errors import ApiError
from ..api.responses import error_response, json_response

__all__ = ["ROUTES"]


async def health(request: Request) -> Response:
    return json_response({"ok": True, "status": "ok", "request_id": request.state.request_id})


async def ready(request: Request) -> Response:
    ctx = request.app.state.ctx
    request_id = request.state.request_id
    try:
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(ctx.db.ping, abandon_on_cancel=True)
    except Exception:
        error = ApiError(
            "not_ready",
            "The database is not reachable.",
            details={"checks": {"database": "unreachable"}},
        )
        return error_response(error, request_id)
    return json_response(
        {"ok": True, "status": "ready", "checks": {"database": "ok"}, "request_id": request_id}
    )


ROUTES = [
    Route(prefix + path, endpoint, methods=["GET"])
    for prefix in ("", "/api")
    for path, endpoint in (("/health", health), ("/ready", ready))
]

"""``GET /metrics`` and the request families it shows (:mod:`reference_server.metrics`).

The route is off the API's surface: mounted only when ``SVC_METRICS_TOKEN`` is set, never
under ``/api``, in no OpenAPI document, and answered only to ``Authorization: Bearer``
with that token (a scraper's ``bearer_token``).  Every request is timed here, outermost,
and counted under its route's template (``unmatched`` for a path no route serves), so a
path's ids never become label values.
"""

from __future__ import annotations

import hmac
import time

import anyio.to_thread
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import metrics, telemetry
from ..context import ServerContext
from .auth import credential_kind
from .errors import ApiError
from .pipeline import API_PREFIX
from .responses import error_response

__all__ = ["METRICS_PATH", "MetricsMiddleware", "metrics_route"]

METRICS_PATH = "/metrics"


class MetricsMiddleware:
    """Counts and times every HTTP request by route template, method and status, and
    logs it (``SVC_LOG_FORMAT=json``: :func:`reference_server.telemetry.log_request`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # what the request id middleware answers if nothing else did

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            route, seconds = _template(scope), time.perf_counter() - began
            metrics.observe_request(route, scope["method"], status, seconds)
            telemetry.log_request(
                request_id=scope.get("state", {}).get("request_id"),
                route=route,
                method=scope["method"],
                status=status,
                seconds=seconds,
                credential=credential_kind(Headers(scope=scope)),
            )


def _template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return "unmatched"
    return path.removeprefix(API_PREFIX) if path.startswith(API_PREFIX + "/") else path


def metrics_route(ctx: ServerContext) -> Route | None:
    """The route, when the operator set a token; otherwise none (a 404 like any path)."""
    token = ctx.settings.metrics_token
    if token is None:
        return None
    expected = f"Bearer {token}".encode()

    async def scrape(request: Request) -> Response:
        given = request.headers.get("authorization")
        if given is None or not hmac.compare_digest(given.encode(), expected):
            code = "unauthenticated" if given is None else "invalid_credential"
            refused = ApiError(code, "GET /metrics takes the operator's SVC_METRICS_TOKEN.")
            return error_response(refused, request.state.request_id)
        body = await anyio.to_thread.run_sync(metrics.render, ctx.db, ctx.now())
        return Response(body, media_type=metrics.CONTENT_TYPE)

    return Route(METRICS_PATH, scrape, methods=["GET"])

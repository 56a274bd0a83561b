"""Pure ASGI middleware: a request id for every request, on every response.

It runs outside everything else, so even a failure that escapes the app becomes an
envelope with the same id in the body and in ``X-Request-Id``.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from svc_asgi import new_request_id

from ..telemetry import REQUEST_ID
from .errors import ApiError
from .responses import send_error

__all__ = ["RequestIdMiddleware"]

log = logging.getLogger("reference_server")


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        bound = REQUEST_ID.set(request_id)
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unhandled error in request %s", request_id)
            if started:
                raise
            failed = ApiError("internal_error", "The server failed; the request may be retried.")
            await send_error(send, failed, request_id, (b"x-request-id", request_id.encode()))
        finally:
            REQUEST_ID.reset(bound)

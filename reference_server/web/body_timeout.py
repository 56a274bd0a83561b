"""Pure ASGI middleware: a request body must arrive within ``body_timeout_seconds`` (what a
client sees: docs/server.md, "Slow clients").

The server hands the app a request as soon as its headers are in; a client that
announces a ``Content-Length`` and then stalls would hold the app (and a connection, and
perhaps a worker thread) for as long as it likes.  Past the deadline the client is
answered 408 and the app is told the client went away (``http.disconnect``), which it
already handles.  Once the body is complete, ``receive`` is passed through untouched: a
streaming response may wait on it for a disconnect as long as it needs.
"""

from __future__ import annotations

import math
import time

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError
from .responses import send_error

__all__ = ["BodyTimeoutMiddleware"]


class BodyTimeoutMiddleware:
    def __init__(self, app: ASGIApp, *, timeout_seconds: float) -> None:
        self.app = app
        self.timeout = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(scope, receive, send, self.timeout)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except Exception:
            if not exchange.timed_out:
                raise
            # The app failed on the missing body (e.g. ClientDisconnect): already answered.


class _Exchange:
    """One request's ``receive`` and ``send`` with the body deadline between them: the
    clock starts at the first ``receive``; past the deadline the client gets the 408 (if
    nothing was sent yet) and the app a disconnect, and what the app sends is dropped."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, timeout: float) -> None:
        self._scope = scope
        self._receive = receive
        self._send = send
        self._timeout = timeout
        self._deadline = math.inf
        self._body_done = False
        self._started = False
        self.timed_out = False

    async def receive(self) -> Message:
        if self.timed_out:
            return {"type": "http.disconnect"}
        if self._body_done:
            return await self._receive()
        if self._deadline == math.inf:
            self._deadline = time.monotonic() + self._timeout
        # A floor so a body already buffered is still taken after a slow handler.
        with anyio.move_on_after(max(self._deadline - time.monotonic(), 0.001)) as waiting:
            message = await self._receive()
        if waiting.cancelled_caught:  # ours, not a caller's cancellation
            self.timed_out = True
            if not self._started:
                await _send_timeout(self._send, self._scope)
            return {"type": "http.disconnect"}
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_done = True
        return message

    async def send(self, message: Message) -> None:
        if self.timed_out:
            return  # the 408 is the answer; the app learns of it as a disconnect
        if message["type"] == "http.response.start":
            self._started = True
        await self._send(message)


async def _send_timeout(send: Send, scope: Scope) -> None:
    request_id = scope.get("state", {}).get("request_id", "")
    error = ApiError(
        "request_timeout",
        "The request body did not arrive in time; send it promptly and retry.",
    )
    await send_error(send, error, request_id, (b"connection", b"close"))

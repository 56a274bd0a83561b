"""Pure ASGI middleware: a request body must arrive within ``body_timeout_seconds``.

The server hands the app a request as soon as its headers are in; a client that
announces a ``Content-Length`` and then stalls would hold the app (and a connection, and
perhaps a worker thread) for as long as it likes.  This layer wraps ``receive`` for every
route (API endpoints and raw routes such as the hosted gates alike): from the first time
the app asks for the body, the whole body must arrive before the deadline.  If it does
not, the client is answered ``408 request_timeout`` in the envelope with
``Connection: close`` (the server then closes the connection), and the app is told the
client went away (``http.disconnect``), which it already handles; whatever it sends after
that is dropped.  Once the body is complete, ``receive`` is passed through untouched: a
streaming response may wait on it for a disconnect as long as it needs.

Headers that never complete are the server's business (see :mod:`reference_server.serving`).
"""

from __future__ import annotations

import json
import math
import time

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError

__all__ = ["BodyTimeoutMiddleware"]


class BodyTimeoutMiddleware:
    def __init__(self, app: ASGIApp, *, timeout_seconds: float) -> None:
        self.app = app
        self.timeout = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = math.inf
        body_done = False
        started = False
        timed_out = False

        async def timed_receive() -> Message:
            nonlocal deadline, body_done, timed_out
            if timed_out:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            if deadline == math.inf:
                deadline = time.monotonic() + self.timeout
            # A floor so a body already buffered is still taken after a slow handler.
            with anyio.move_on_after(max(deadline - time.monotonic(), 0.001)) as waiting:
                message = await receive()
            if waiting.cancelled_caught:  # ours, not a caller's cancellation
                timed_out = True
                if not started:
                    await _send_timeout(send, scope)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 is the answer; the app learns of it as a disconnect
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, timed_receive, tracked_send)
        except Exception:
            if not timed_out:
                raise
            # The app failed on the missing body (e.g. ClientDisconnect): already answered.


async def _send_timeout(send: Send, scope: Scope) -> None:
    request_id = scope.get("state", {}).get("request_id", "")
    error = ApiError(
        "request_timeout",
        "The request body did not arrive in time; send it promptly and retry.",
    )
    raw = json.dumps(error.body(request_id)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})

"""The uvicorn server ``svc-server run`` (and the test suite) serves the app with.

Slow clients are cut off at every point where the server waits on them:

- **headers**: uvicorn 0.54 bounds the idle time between keep-alive requests but not the
  time a client takes to send a request line and headers, so a connection that opens
  and trickles (or sends nothing) is held forever.  :class:`_GuardedProtocol` (a
  small subclass of uvicorn's h11 protocol) arms a timer when a connection opens and when
  the next request starts arriving, and disarms it once the head is complete; if it
  fires, the connection is closed (no response can be framed for a request that was
  never read).
- **body**: the app's :class:`~reference_server.web.body_timeout.BodyTimeoutMiddleware`
  answers ``408 request_timeout`` and closes (it applies under any server).
- **keep-alive**: uvicorn's ``timeout_keep_alive``.
- **an answer nobody reads**: a client may ask for long answers (pipelined, or one at a
  time) and read none of them.  Once the socket's buffers are full uvicorn pauses the
  app's ``send`` until the transport drains, which then never happens, and nothing
  bounds that wait: the connection, its task and its buffers were held for good, even
  past a close (asyncio flushes before it closes).  The protocol asks to be paused at
  any byte the kernel would not take and, while paused, runs ``send_timeout_seconds``;
  any progress (the transport drains) disarms it; if it fires the connection is dropped
  (``abort``: there is no way to finish the answer) and the app's ``send`` returns.
- **a body nobody reads**: a route may answer without reading the body (a 404, a
  refusal before parsing).  uvicorn then discards the rest as it arrives, and each
  arriving byte cancels its keep-alive timer without re-arming it, so a client trickling
  a large body held the connection forever.  The same protocol subclass bounds that wait
  by the keep-alive timeout, armed once, and then closes (the answer is already sent).

A request h11 cannot read at all (a malformed request line, header or framing) is
answered ``400 bad_request`` in the service's envelope with a request id, like every other
error, instead of uvicorn's plain-text 400, and the connection is closed; a head that grows
past :data:`MAX_HEAD_BYTES` before it is complete is ``431 headers_too_large``.

Its access log shows a secret path (a one-time link's token) as its route's template
(:mod:`.web.access_log`).

A server that owns its process (``svc-server run``; ``own_process=True``) also moves what
start-up left on the heap out of the garbage collector's reach, see :func:`freeze_heap`.

Build servers with :func:`build_server` only, so every one has these protections.

uvicorn (0.54) has no public hook or setting for the head, unread-body and stalled-answer
deadlines or the 400's envelope (``timeout_keep_alive`` and
``h11_max_incomplete_event_size`` are used for what they do cover), so
:class:`_GuardedProtocol` subclasses its internal ``H11Protocol``:
``tests/server/test_serving_internals.py`` fails, by name, when a uvicorn release changes
what it overrides or reads, or adds a timeout setting that might replace part of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from svc_asgi import new_request_id

from . import telemetry
from .app import create_app, served
from .settings import Settings
from .web.access_log import hide_secret_paths
from .web.errors import ApiError

__all__ = ["MAX_HEAD_BYTES", "build_server", "freeze_heap"]


def freeze_heap() -> None:
    """Collect once, then exclude every object alive now from later collections.

    Start-up leaves about 180,000 long-lived objects (modules, classes, the app, the
    protocol SDKs); each full (generation 2) collection walked them all, 80-100 ms with
    the GIL held, several times a minute under load: that pause was the p99 of every
    route at 32 clients.  Frozen, a full collection walks only what was made since.
    Call it once per process, after start-up and before serving: garbage made before the
    freeze is collected first; objects made after it are collected as usual.
    """
    gc.collect()
    gc.freeze()


class _Server(uvicorn.Server):
    """uvicorn's server, freezing the heap between the app's start-up (its lifespan) and
    the first connection accepted, so no request waits for the freeze's collection."""

    own_process: bool = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.own_process:
            lifespan_startup = self.lifespan.startup

            async def start_then_freeze() -> None:
                await lifespan_startup()
                if not self.lifespan.should_exit:
                    freeze_heap()

            self.lifespan.startup = start_then_freeze
        await super().startup(sockets)


class _GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the module's guards (see the module docstring)."""

    #: Set on the per-server subclass made by :func:`_protocol_class`.
    head_timeout: float = 10.0
    send_timeout: float = 30.0
    _deadline: asyncio.TimerHandle | None = None
    _send_deadline: asyncio.TimerHandle | None = None
    #: What the armed deadline waits for: ``"head"`` or ``"unread body"``.
    _waiting_for: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Paused at any byte the kernel would not take (not only past 64 KiB), resumed
        # when all are taken: a client that reads nothing stalls an answer of any size,
        # and a closing transport that cannot flush stays paused too.
        transport.set_write_buffer_limits(high=0)
        self._watch()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None:
            self._send_deadline = self.loop.call_later(self.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_send()

    def _disarm_send(self) -> None:
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _send_timed_out(self) -> None:
        """No byte of the answer was taken for ``send_timeout``: drop the connection (a
        close would wait for a flush that never comes); uvicorn then marks the request
        disconnected and the app's pending ``send`` returns."""
        self._send_deadline = None
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_send()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 could not read (it logged why), in the
        envelope; h11 lets a server answer once more after the client's protocol error.
        h11 keeps what it could not parse: while a head is awaited (no request, or the
        last one answered), more than a head may hold is a head too large (the one case
        h11 hints 431 for); anything else is a request it cannot read."""
        reading_head = self.cycle is None or self.cycle.response_complete
        if reading_head and len(self.conn.trailing_data[0]) > MAX_HEAD_BYTES:
            error = ApiError("headers_too_large", _TOO_LARGE)
        else:
            error = ApiError("bad_request", _UNREADABLE)
        request_id = new_request_id()
        raw = json.dumps(error.body(request_id)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
            (b"connection", b"close"),
            (b"x-request-id", request_id.encode()),
        ]
        with contextlib.suppress(h11.LocalProtocolError):
            response = h11.Response(status_code=error.status, headers=headers)
            self.transport.write(self.conn.send(response))
            self.transport.write(self.conn.send(h11.Data(data=raw)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()

    def _awaited(self) -> tuple[str, float] | None:
        """What the connection waits on the client for, and for how long at most; ``None``
        when the wait is someone else's to bound (the app reading its body is bounded by
        the body deadline, idling between requests by uvicorn's keep-alive timer)."""
        if self.transport.is_closing():
            return None
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.IDLE and self.timeout_keep_alive_task is None:
            return "head", self.head_timeout
        if theirs is h11.SEND_BODY and ours in (h11.DONE, h11.MUST_CLOSE):
            return "unread body", self.timeout_keep_alive
        return None

    def _watch(self) -> None:
        """Arm the deadline once per wait, so trickling bytes does not extend it."""
        awaited = self._awaited()
        if awaited is None:
            self._disarm()
            return
        kind, seconds = awaited
        if self._waiting_for != kind:
            self._disarm()
            self._waiting_for = kind
            self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._waiting_for = None

    def _timed_out(self) -> None:
        """Close: no response can be framed for a head never read, and an unread body's
        request was already answered."""
        self._deadline = None
        self._waiting_for = None
        if not self.transport.is_closing():
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()


#: The most a request's line and headers may take (h11's own default, made explicit so
#: the 431 can say it): past it, before the head is complete, ``431 headers_too_large``.
MAX_HEAD_BYTES = 16 * 1024

_UNREADABLE = (
    "The request could not be read as HTTP/1.1 (its request line, a header, or how its "
    "body is framed); nothing was done."
)
_TOO_LARGE = (
    f"The request line and headers are larger than {MAX_HEAD_BYTES // 1024} KiB; send "
    "fewer or shorter headers. Nothing was done."
)


def _protocol_class(settings: Settings) -> type[H11Protocol]:
    bounds = {
        "head_timeout": settings.header_timeout_seconds,
        "send_timeout": settings.send_timeout_seconds,
    }
    return type("GuardedH11Protocol", (_GuardedProtocol,), bounds)


def build_server(
    settings: Settings,
    *,
    host: str,
    port: int,
    app: Any = None,
    own_process: bool = False,
    **options: Any,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` (default ``create_app(settings)``; it is
    ``server.config.app``) with the slow-client bounds of ``settings``; ``options`` are
    passed to ``uvicorn.Config`` (``log_level``...).  ``own_process``: the server is its
    process's only work (``svc-server run``), so the heap is frozen after start-up (never
    in a process that makes and drops servers, such as the test suite: what it froze
    would never be collected)."""
    config = uvicorn.Config(
        create_app(settings) if app is None else app,
        host=host,
        port=port,
        http=_protocol_class(settings),
        timeout_keep_alive=settings.keep_alive_timeout_seconds,  # type: ignore[arg-type]
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        **options,
    )
    # After uvicorn's Config, which (re)configures its loggers.
    hide_secret_paths(served(sandbox_routes=True))
    if own_process:  # the process's logging is the server's to set, not a test suite's
        telemetry.configure_logging(settings.log_format)
    server = _Server(config)
    server.own_process = own_process
    return server

"""The blocking send path's own I/O pieces (hand-written; ``_async_io`` is the async twin).

``_sync`` is generated from ``_async`` and imports the same names from here:
:class:`Deadline`, :func:`resolve`, :func:`close`, :class:`PinnedClients`.  A blocked
thread cannot be cancelled, so the deadline is a watchdog thread that shuts the socket
down, and an async resolver is run to completion in its own event loop.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import anyio
import httpx

from ._plan import Plan, default_tls_context
from ._policy import system_resolve

__all__ = ["Deadline", "PinnedClients", "close", "resolve"]


class Deadline:
    """Enforces the total deadline on the sync path, where nothing can be cancelled.

    Per-operation timeouts bound each socket read, but a server trickling one byte at a
    time would never trip them.  httpcore reports each new connection's socket through the
    ``trace`` request extension; when the deadline passes, the watchdog shuts that socket
    down, which wakes the blocked read in the sending thread with an error (which the send
    path reports as ``plan.too_slow()`` since :attr:`fired`).  Only the system resolver,
    which cannot be interrupted, can overrun it, by its own timeouts; the send path then
    checks the time left before sending anything.
    """

    _EVENTS = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})

    def __init__(self, plan: Plan) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._armed = True
        self.fired = False
        self._timer = threading.Timer(max(plan.remaining(), 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disarm()

    def disarm(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._armed = False
            self._sock = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in self._EVENTS:
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sock = sock
                if self.fired:
                    self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            if self._armed:
                self.fired = True
                self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            # socket.socket's own method: also right for an ssl.SSLSocket
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)


def resolve(plan: Plan) -> Iterable[str]:
    """The addresses to check (none for an IP literal); the resolver may be sync or async."""
    if plan.target.ip is not None:
        return ()
    resolver = plan.policy.resolver or system_resolve
    try:
        result = resolver(plan.target.host, plan.target.port)
        if isinstance(result, Awaitable):
            awaitable = result

            async def wait() -> list[str]:
                return await awaitable

            return anyio.run(wait)
        return result
    except OSError as exc:
        raise plan.resolve_failed(exc) from exc


def close(closer: Callable[[], object]) -> None:
    """Close (nothing can interrupt a blocking close, so nothing to shield it from)."""
    closer()


class PinnedClients:
    """Kept-alive connections for a sender that posts again and again (the webhook
    worker): one client per :meth:`Plan.pool_key` -- scheme, checked name, port and the
    checked address the request is pinned to -- so a connection is only ever reused for
    the very name and address it was opened and verified for.  At most ``size`` clients
    are kept (least recently used closed first, never one in use), each with at most
    ``connections`` connections, idle ones closed after ``keepalive_expiry`` seconds
    (short, under common servers' own idle timeouts, so a reused connection is rarely
    one the receiver is closing)."""

    def __init__(
        self, *, size: int = 32, connections: int = 8, keepalive_expiry: float = 2.0
    ) -> None:
        self._size = size
        self._limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=keepalive_expiry,
        )
        self._clients: OrderedDict[tuple[str, str, int, str], httpx.Client] = OrderedDict()
        self._busy: dict[tuple[str, str, int, str], int] = {}

    @contextmanager
    def client(self, key: tuple[str, str, int, str]) -> Iterator[httpx.Client]:
        found = self._clients.pop(key, None)
        if found is None:
            found = httpx.Client(trust_env=False, verify=default_tls_context(), limits=self._limits)
        self._clients[key] = found  # the most recently used, last
        self._busy[key] = self._busy.get(key, 0) + 1
        try:
            self._evict()
            yield found
        finally:
            self._busy[key] -= 1
            if not self._busy[key]:
                del self._busy[key]

    def _evict(self) -> None:
        idle = [key for key in self._clients if key not in self._busy]
        for key in idle[: max(0, len(self._clients) - self._size)]:
            close(self._clients.pop(key).close)

    def close(self) -> None:
        """Close every kept connection."""
        while self._clients:
            close(self._clients.popitem()[1].close)

"""The blocking send path: :func:`send_sync`, for threads (the webhook worker)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Awaitable, Iterable, Iterator
from types import TracebackType
from typing import Any

import anyio
import httpx

from ..invariant import InvariantError
from ._plan import Headers, OutboundResponse, Plan, default_tls_context, take
from ._policy import OutboundPolicy, system_resolve

__all__ = ["send_sync"]


class _Watchdog:
    """Enforces the total deadline on the sync path, where nothing can be cancelled.

    Per-operation timeouts bound each socket read, but a server trickling one byte at a
    time would never trip them.  httpcore reports each new connection's socket through the
    ``trace`` request extension; when the deadline passes, the watchdog shuts that socket
    down, which wakes the blocked read in the sending thread with an error.
    """

    _EVENTS = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._armed = True
        self.fired = False
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
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


def _read_capped_sync(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    if response.is_stream_consumed:
        return response.content[:cap], len(response.content) > cap
    body = bytearray()
    chunks: Iterator[bytes] = response.iter_raw()
    try:
        for chunk in chunks:
            if take(body, chunk, cap):
                return bytes(body), True
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return bytes(body), False


def _resolve_sync(plan: Plan) -> Iterable[str]:
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


def _attempt_sync(
    plan: Plan, http: httpx.Client, addresses: list[str], watchdog: _Watchdog
) -> OutboundResponse:
    last: httpx.ConnectError | None = None
    for ip in addresses:
        try:
            response = http.send(
                plan.request(ip, trace=watchdog.trace),
                stream=True,
                follow_redirects=False,
                auth=None,
            )
        except httpx.ConnectError as exc:
            if watchdog.fired or not plan.next_address_worth_trying(exc):
                raise
            last = exc
            continue
        try:
            body, truncated = _read_capped_sync(response, plan.policy.max_response_bytes)
            watchdog.disarm()
        finally:
            response.close()
        return plan.response(response, body, truncated, ip)
    if last is None:
        raise InvariantError("expected last is not None")
    raise last


def send_sync(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
    client: httpx.Client | None = None,
) -> OutboundResponse:
    """The blocking twin of :func:`send` (for the webhook worker's threads).

    Same checks, same pinning, same results and errors, and the same rules for a given
    ``client`` (an :class:`httpx.Client` here).  The total deadline is enforced
    by a watchdog thread; only the system resolver, which cannot be interrupted, can
    overrun it (by its own timeouts), and then the request is not sent at all.
    """
    plan = Plan.make(method, url, headers, content, policy)
    addresses = plan.pin(_resolve_sync(plan))
    if plan.remaining() <= 0:
        raise plan.too_slow()
    http = (
        client
        if client is not None
        else httpx.Client(trust_env=False, verify=default_tls_context())
    )
    try:
        with _Watchdog(plan.remaining()) as watchdog:
            try:
                return _attempt_sync(plan, http, addresses, watchdog)
            except httpx.HTTPError as exc:
                if watchdog.fired:
                    raise plan.too_slow() from exc
                raise plan.failed(exc) from exc
    finally:
        if client is None:
            http.close()

"""The async send path's own I/O pieces (hand-written; ``_sync_io`` is the blocking twin).

``_async`` imports these by name and ``_sync`` is generated from it, so the two modules
offer the same names: :class:`Deadline`, :func:`resolve`, :func:`close` and the
kept-alive connection pool (``AsyncPinnedClients`` / ``PinnedClients``).  They are
the part of sending that is not the same code with ``await`` removed: a task can be
cancelled when the total deadline passes, a blocking thread cannot.
"""

from __future__ import annotations

import math
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import httpx

from ._plan import Plan, default_tls_context
from ._policy import system_resolve_async
from ._transport import AsyncPinnedClient

__all__ = ["AsyncPinnedClients", "Deadline", "close", "resolve"]


class Deadline:
    """The total deadline as a cancel scope: whatever is awaited when it passes is
    cancelled, and the send fails with ``plan.too_slow()``."""

    #: No ``trace`` request extension is needed: cancellation reaches every await.
    trace: Callable[[str, dict[str, Any]], None] | None = None

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._scope = anyio.move_on_after(plan.remaining())

    def __enter__(self) -> Deadline:
        self._scope.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._scope.__exit__(kind, exc, tb):  # the deadline cancelled the send
            raise self._plan.too_slow() from None

    @property
    def fired(self) -> bool:
        return self._scope.cancel_called

    def disarm(self) -> None:
        """The body is in: what is left (closing) is not bound by the deadline."""
        self._scope.deadline = math.inf


async def resolve(plan: Plan) -> Iterable[str]:
    """The addresses to check (none for an IP literal); the resolver may be sync or async."""
    if plan.target.ip is not None:
        return ()
    resolver = plan.policy.resolver or system_resolve_async
    try:
        result = resolver(plan.target.host, plan.target.port)
        return await result if isinstance(result, Awaitable) else result
    except OSError as exc:
        raise plan.resolve_failed(exc) from exc


async def close(closer: Callable[[], Awaitable[object]]) -> None:
    """Close even when the total deadline has just cancelled us, so no socket leaks."""
    with anyio.move_on_after(1, shield=True):
        await closer()


class AsyncPinnedClients:
    """Kept-alive connections for a sender that posts again and again (the webhook
    worker): one client per :meth:`Plan.pool_key` -- scheme, checked name, port and the
    checked address the request is pinned to -- so a connection is only ever reused for
    the very name and address it was opened and verified for.  At most ``size`` clients
    are kept (least recently used closed first, never one in use), each with at most
    ``connections`` connections, idle ones closed after ``keepalive_expiry`` seconds
    (short, under common servers' own idle timeouts, so a reused connection is rarely
    one the receiver is closing).  Its clients speak through a lean transport of their
    own (``_transport``: h11 over asyncio streams, nothing to choose but a connection)."""

    def __init__(
        self,
        *,
        size: int = 32,
        connections: int = 8,
        keepalive_expiry: float = 2.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._size = size
        #: The verifying TLS context (``None``: :func:`~._plan.default_tls_context`).
        self._tls = tls
        self._limits = httpx.Limits(
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=keepalive_expiry,
        )
        self._clients: OrderedDict[tuple[str, str, int, str], httpx.AsyncClient] = OrderedDict()
        self._busy: dict[tuple[str, str, int, str], int] = {}

    @asynccontextmanager
    async def client(self, key: tuple[str, str, int, str]) -> AsyncIterator[httpx.AsyncClient]:
        found = self._clients.pop(key, None)
        if found is None:
            found = AsyncPinnedClient(tls=self._tls or default_tls_context(), limits=self._limits)
        self._clients[key] = found  # the most recently used, last
        self._busy[key] = self._busy.get(key, 0) + 1
        try:
            await self._evict()
            yield found
        finally:
            self._busy[key] -= 1
            if not self._busy[key]:
                del self._busy[key]

    async def _evict(self) -> None:
        idle = [key for key in self._clients if key not in self._busy]
        for key in idle[: max(0, len(self._clients) - self._size)]:
            await close(self._clients.pop(key).aclose)

    async def aclose(self) -> None:
        """Close every kept connection."""
        while self._clients:
            await close(self._clients.popitem()[1].aclose)

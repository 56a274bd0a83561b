"""Kept-alive connections, each reused only for the checked name and address it was
opened for: :class:`AsyncPinnedClients`, over httpcore's ``AsyncConnectionPool``.

Against the h11 pool of our own it replaced (1.6k lines with sync and async twins), a
standalone worker draining 200 queued webhooks spends the same: 3.08 M instructions per
delivery against 3.05-3.09 M (callgrind, SQLite, quiet machine, the same driver), and the
drain's events/s moved within their noise (docs/performance.md)."""

from __future__ import annotations

import ssl
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpcore

from ._plan import Plan, PoolKey

__all__ = ["AsyncPinnedClients"]


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to one checked address whatever host httpcore names: the URL keeps the
    name (for the ``Host`` header, TLS SNI and the certificate check) while the socket
    goes to the address that name was checked at, so nothing resolves it a second time."""

    def __init__(self, ip: str, backend: httpcore.AsyncNetworkBackend) -> None:
        self._ip = ip
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(
            self._ip, port, timeout, local_address, socket_options
        )
        return _CorkedStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _CorkedStream(httpcore.AsyncNetworkStream):
    """Holds what httpcore writes until it reads, so a request's head and body leave in
    one send.  httpcore writes them apart: two system calls, two segments and two
    wake-ups of the receiver per request.  Measured with 8 senders posting 600 bytes to a
    local receiver (medians of 5 runs, 2 loaded cores): CPU per request 620 -> 535 us in
    the sender, 75 -> 55 us in the receiver; 424 -> 483 requests/s.  A write error
    surfaces at the read, as an httpcore error like any other."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: list[bytes] = []
        self._write_timeout: float | None = None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._held.append(buffer)
        self._write_timeout = timeout

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._held:
            held, self._held = b"".join(self._held), []
            await self._stream.write(held, self._write_timeout)
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        return _CorkedStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class AsyncPinnedClients:
    """Kept-alive connections for a sender that posts again and again (the webhook
    worker, pay-url): one httpcore pool per :meth:`Plan.pool_key` -- scheme, checked name,
    port, checked address and TLS context -- so a connection is only ever reused for the
    very name and address it was opened and verified for.  At most ``size`` pools are
    kept (least recently used closed first, never one in use), each with at most
    ``connections`` connections, idle ones closed after ``keepalive_expiry`` seconds
    (short, under common servers' own idle timeouts).  httpcore reuses a connection only
    after a whole exchange, and drops an idle one the server closed or wrote to.

    Without ``keep_alive`` no connection outlives its request (``Connection: close``):
    :func:`~._send.send` uses such a pool, once, when it is given none.
    ``network_backend`` is what the pinned connections are opened through (default
    ``httpcore.AnyIOBackend()``; tests record with their own).
    """

    def __init__(
        self,
        *,
        size: int = 32,
        connections: int = 8,
        keepalive_expiry: float = 2.0,
        keep_alive: bool = True,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.keep_alive = keep_alive
        self._size = size
        self._connections = connections
        self._expiry = keepalive_expiry
        self._backend = network_backend or httpcore.AnyIOBackend()
        self._pools: OrderedDict[PoolKey, httpcore.AsyncConnectionPool] = OrderedDict()
        self._busy: Counter[PoolKey] = Counter()

    @asynccontextmanager
    async def pool(self, plan: Plan, ip: str) -> AsyncIterator[httpcore.AsyncConnectionPool]:
        """The pool for ``plan`` pinned to ``ip`` (made on first use), kept from eviction
        while in use."""
        key = plan.pool_key(ip)
        found = self._pools.pop(key, None)
        if found is None:
            found = httpcore.AsyncConnectionPool(
                ssl_context=key[4],
                max_connections=self._connections,
                max_keepalive_connections=self._connections if self.keep_alive else 0,
                keepalive_expiry=self._expiry,
                network_backend=_PinnedBackend(ip, self._backend),
            )
        self._pools[key] = found  # the most recently used, last
        self._busy[key] += 1
        try:
            await self._evict()
            yield found
        finally:
            self._busy[key] -= 1
            if not self._busy[key]:
                del self._busy[key]

    async def _evict(self) -> None:
        idle = [key for key in self._pools if key not in self._busy]
        for key in idle[: max(0, len(self._pools) - self._size)]:
            await _close(self._pools.pop(key))

    async def aclose(self) -> None:
        """Close every kept connection."""
        while self._pools:
            await _close(self._pools.popitem()[1])


async def _close(pool: httpcore.AsyncConnectionPool) -> None:
    """Close even when the total deadline has just cancelled us, so no socket leaks."""
    with anyio.move_on_after(1, shield=True):
        await pool.aclose()

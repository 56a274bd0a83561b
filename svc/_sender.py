"""The ``httpx`` client an SDK client sends through: the one passed in, or its own.

An async client is bound to the event loop it first sends in: httpx's connection pool
keeps each connection's streams on that loop.  A program may run several loops one after
another: ``asyncio.run`` called twice with one module-level client, or Starlette's
``TestClient`` used without ``with``, which runs every request in a loop of its own (and
so does a ``PaymentGate`` behind it).  A kept-alive connection from a loop that is gone
then fails the next request with ``RuntimeError: Event loop is closed``, which no retry
or error class of ours would describe.  :class:`AsyncSender` therefore opens a new
``httpx.AsyncClient`` when it finds itself in another asyncio loop than its client's,
and leaves the old one, whose connections only that loop could close, to the garbage
collector.  It does so only for a client it made with httpx's own transport: a client
or a transport passed in is its owner's, pool and all.  One loop at a time is kept, so a
client alternating between the loops of several threads reconnects at each change
rather than holding a pool per loop (the connections would keep each dead loop alive).

The blocking :class:`Sender` has no loop to follow: one ``httpx.Client``.

Every client made here shares one TLS context: building one loads the CA bundle, which
costs more than a request on loopback, and agents often make a client per task.
"""

from __future__ import annotations

import asyncio
import functools
import ssl

import httpx

__all__ = ["AsyncSender", "Sender"]


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``
    as read at the first client), made once per process."""
    return httpx.create_ssl_context()


def _async_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(verify=_tls())


class AsyncSender:
    """Sends an async SDK client's requests (see the module)."""

    def __init__(
        self, http_client: httpx.AsyncClient | None, transport: httpx.AsyncBaseTransport | None
    ) -> None:
        self._owned = http_client is None
        self._follows_loop = http_client is None and transport is None
        self._client = http_client or (
            httpx.AsyncClient(transport=transport) if transport else _async_client()
        )
        self._loop: asyncio.AbstractEventLoop | None = None

    async def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        if self._follows_loop:
            self._follow_running_loop()
        return await self._client.send(request, stream=stream)

    def _follow_running_loop(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): its runs do not share a client
            return
        if loop is self._loop:
            return
        if self._loop is not None:
            self._client = _async_client()
        self._loop = loop

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    async def aclose(self) -> None:
        """Close the client made here (not one passed in); from another loop than its
        client's, what is closed is a new one: the old one's connections are that loop's."""
        if self._follows_loop:
            self._follow_running_loop()
        if self._owned:
            await self._client.aclose()


class Sender:
    """Sends a blocking SDK client's requests: the client passed in, or one of its own."""

    def __init__(self, http_client: httpx.Client | None, transport: httpx.BaseTransport | None):
        self._owned = http_client is None
        self._client = http_client or (
            httpx.Client(transport=transport) if transport else httpx.Client(verify=_tls())
        )

    def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        return self._client.send(request, stream=stream)

    @property
    def is_closed(self) -> bool:
        return self._client.is_closed

    def close(self) -> None:
        """Close the client made here (not one passed in)."""
        if self._owned:
            self._client.close()

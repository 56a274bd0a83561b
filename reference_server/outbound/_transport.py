"""The kept-alive pool's transport: HTTP/1.1 (h11) over asyncio streams, to one origin.

:class:`~._async_io.AsyncPinnedClients` gives each checked name and address a client of
its own, so the transport under it never chooses where to connect: every request it is
handed names the pinned address (:meth:`~._plan.Plan.request`), and all of them the same
one.  httpcore's general pool spends about a millisecond of CPU per request on what that
leaves nothing to decide (its locks and queues, anyio stream wrappers, a ``select()``
on every reuse): it was a fifth of the reference server's CPU per ``pay-url``, whose
probe and paid request go through here.  This one keeps only what the pool needs:

* at most ``max_connections`` open at once (a request beyond waits for one, up to the
  ``pool`` timeout), idle ones kept ``keepalive_expiry`` seconds at most;
* the request's ``connect``, ``read`` and ``write`` timeouts, and TLS with SNI and
  certificate verification on ``sni_hostname`` (the checked name), as httpcore does;
* a connection is reused only when h11 says the exchange ended cleanly and both sides
  may go on (a body left unread, a ``Connection: close``, an error: it is closed).

Failures are raised as httpx's own exceptions (``ConnectError`` with the TLS error as
its cause, ``ReadTimeout``, ``RemoteProtocolError``...), which the send path maps to
``OutboundFailed`` as before.  asyncio only: the server and the worker run on it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import h11
import httpx

__all__ = ["AsyncPinnedClient", "AsyncPinnedTransport"]

_READ_SIZE = 64 * 1024


class _Connection:
    """One socket and its h11 state machine."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0

    def usable(self, now: float, expiry: float) -> bool:
        """Still fit for a new request after sitting idle: not expired, not closed or
        half-closed by the server (an EOF the event loop has seen), and nothing sent
        since the last answer (a server's ``408`` before it closes an idle connection
        would otherwise be read as the next request's answer).  What arrived lies in
        the stream's buffer, which asyncio keeps as ``_buffer``; without it (another
        Python), no connection is reused rather than risk one."""
        return (
            now - self.idle_since < expiry
            and not self.writer.is_closing()
            and not self.reader.at_eof()
            and not self.h11.trailing_data[0]
            and len(getattr(self.reader, "_buffer", b"?")) == 0
        )

    def close(self) -> None:
        """Close politely (an exchange that ended cleanly, or an idle connection)."""
        self.writer.close()

    def abort(self) -> None:
        """Close at once: what the server still sends (a body cut short) is not read,
        and its writes fail, as httpcore's do when a stream is closed early."""
        self.writer.transport.abort()

    async def next_event(self, seconds: float | None) -> Any:
        """h11's next event, reading (each read within ``seconds``) while it needs data."""
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(seconds):
                    data = await self.reader.read(_READ_SIZE)
            except TimeoutError as exc:
                raise httpx.ReadTimeout("timed out reading the response") from exc
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            self.h11.receive_data(data)


def _timeouts(request: httpx.Request) -> dict[str, float | None]:
    found = request.extensions.get("timeout")
    return found if isinstance(found, dict) else {}


class _Body(httpx.AsyncByteStream):
    """The response body, read from the connection as it is iterated; closing it hands
    the connection back (reusable only if the whole exchange ended cleanly)."""

    def __init__(
        self, transport: AsyncPinnedTransport, conn: _Connection, read: float | None
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._read = read
        self._ended = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while not self._ended:
            try:
                event = await conn.next_event(self._read)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._ended = True
            elif isinstance(event, h11.ConnectionClosed):  # pragma: no cover - h11 raises
                raise httpx.RemoteProtocolError("the server closed the connection")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._transport._release(self._conn, reusable=self._ended):
            await asyncio.sleep(0)  # the loop closes an aborted socket on its next turn


class AsyncPinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport to one pinned origin (see the module docstring)."""

    def __init__(self, *, tls: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._tls = tls
        self._max = limits.max_connections or 100
        self._keep = (
            limits.max_keepalive_connections
            if limits.max_keepalive_connections is not None
            else self._max
        )
        self._expiry = limits.keepalive_expiry if limits.keepalive_expiry is not None else 5.0
        self._idle: list[_Connection] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = _timeouts(request)
        conn = await self._acquire(request, timeouts)
        try:
            await self._send(conn, request, timeouts.get("write"))
            read = timeouts.get("read")
            try:
                event = await conn.next_event(read)
                while isinstance(event, h11.InformationalResponse):
                    event = await conn.next_event(read)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if not isinstance(event, h11.Response):  # closed before answering
                raise httpx.RemoteProtocolError(
                    "the server closed the connection without answering"
                )
        except BaseException:
            self._release(conn, reusable=False)
            raise
        return httpx.Response(
            status_code=event.status_code,
            headers=event.headers.raw_items(),
            stream=_Body(self, conn, read),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
        )

    async def _send(self, conn: _Connection, request: httpx.Request, seconds: float | None) -> None:
        url = request.url
        parts = [
            conn.h11.send(
                h11.Request(method=request.method, target=url.raw_path, headers=request.headers.raw)
            )
        ]
        async for chunk in request.stream:  # type: ignore[union-attr]
            if chunk:
                parts.append(conn.h11.send(h11.Data(data=chunk)))
        parts.append(conn.h11.send(h11.EndOfMessage()))
        try:
            conn.writer.write(b"".join(part for part in parts if part))
            async with asyncio.timeout(seconds):
                await conn.writer.drain()
        except TimeoutError as exc:
            raise httpx.WriteTimeout("timed out sending the request") from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc

    # -- the connections ----------------------------------------------------------------

    async def _acquire(
        self, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> _Connection:
        """An idle connection still fit for use, or a new one when fewer than the limit
        are open, or the next one released (up to the ``pool`` timeout)."""
        pool = timeouts.get("pool")
        deadline = None if pool is None else time.monotonic() + pool
        while True:
            now = time.monotonic()
            while self._idle:
                conn = self._idle.pop()  # the most recently used: the likeliest alive
                if conn.usable(now, self._expiry):
                    return conn
                self._drop(conn)
            if self._open < self._max:
                self._open += 1
                try:
                    return await self._connect(request, timeouts.get("connect"))
                except BaseException:
                    self._open -= 1
                    self._wake_one()
                    raise
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                async with asyncio.timeout(left):
                    await waiter
            except BaseException as exc:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, but not going on: pass the turn along
                if isinstance(exc, TimeoutError):
                    raise httpx.PoolTimeout("timed out waiting for a connection") from exc
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, request: httpx.Request, seconds: float | None) -> _Connection:
        url = request.url
        tls = None
        server_hostname = None
        if url.scheme == "https":
            tls = self._tls
            sni = request.extensions.get("sni_hostname")
            server_hostname = sni if isinstance(sni, str) else url.host
        try:
            async with asyncio.timeout(seconds):
                reader, writer = await asyncio.open_connection(
                    url.host,
                    url.port or (443 if tls else 80),
                    ssl=tls,
                    server_hostname=server_hostname,
                    limit=_READ_SIZE,
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout("timed out connecting") from exc
        except OSError as exc:  # ssl.SSLError included: the cause says which
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(reader, writer)

    def _release(self, conn: _Connection, *, reusable: bool) -> bool:
        """Hand a connection back: kept for the next request if the exchange ended
        cleanly and both sides may go on (``True``), closed otherwise."""
        state = conn.h11
        kept = (
            reusable
            and state.our_state is h11.DONE
            and state.their_state is h11.DONE
            and len(self._idle) < self._keep
        )
        if kept:
            state.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        elif reusable and state.their_state is h11.DONE:
            self._drop(conn)  # a whole answer, then the end: close politely
        else:
            conn.abort()
            self._open -= 1
        self._wake_one()
        return kept

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._open -= 1

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def aclose(self) -> None:
        while self._idle:
            self._drop(self._idle.pop())


class AsyncPinnedClient(httpx.AsyncClient):
    """A client over :class:`AsyncPinnedTransport` whose :meth:`send` hands the request
    straight to it: the send path asks for no auth, no redirects and no cookies (a
    client's layers for them, and the cookie jar it would fill from every answer, cost
    more than the exchange itself here)."""

    def __init__(self, *, tls: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._pinned = AsyncPinnedTransport(tls=tls, limits=limits)
        super().__init__(trust_env=False, transport=self._pinned)

    async def send(self, request: httpx.Request, **_: Any) -> httpx.Response:
        """The response, its body left to stream (``stream=True``: the send path reads it
        capped, and closes it)."""
        response = await self._pinned.handle_async_request(request)
        response.request = request
        return response

"""The send path, :func:`send`, and its blocking form :func:`send_sync`."""

from __future__ import annotations

import atexit
import functools
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from typing import TypeVar
from urllib.parse import urlsplit

import anyio
import httpcore
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ..telemetry import span
from ._plan import HTTP_ERRORS, Headers, OutboundResponse, Plan, take
from ._policy import OutboundPolicy, system_resolve_async
from ._pool import AsyncPinnedClients

__all__ = ["send", "send_sync"]


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


async def _read_capped(response: httpcore.Response, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the body; the rest is left unread (closing the response
    then closes its connection rather than drain it)."""
    body = bytearray()
    chunks = response.aiter_stream()
    try:
        async for chunk in chunks:
            if take(body, chunk, cap):
                return bytes(body), True
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]  # an async generator
    return bytes(body), False


async def _exchange(
    plan: Plan, pools: AsyncPinnedClients, ip: str, deadline: anyio.CancelScope
) -> OutboundResponse:
    async with pools.pool(plan, ip) as pool:
        response = await pool.handle_async_request(plan.request(keep_alive=pools.keep_alive))
        try:
            body, truncated = await _read_capped(response, plan.policy.max_response_bytes)
            deadline.deadline = math.inf  # the body is in: closing is not bound by the deadline
        finally:
            await response.aclose()
    return plan.response(response, body, truncated, ip)


T = TypeVar("T")


async def attempt(plan: Plan, addresses: list[str], exchange: Callable[[str], Awaitable[T]]) -> T:
    """Try the checked addresses in turn, the next one only after a refused connect."""
    *others, last = addresses
    for ip in others:
        try:
            return await exchange(ip)
        except httpcore.ConnectError as exc:
            if not plan.next_address_worth_trying(exc):
                raise
    return await exchange(last)


async def send(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
    pool: AsyncPinnedClients | None = None,
) -> OutboundResponse:
    """Send one request to a user-supplied URL, safely; see the package docstring and
    :func:`_send`.  A span of its own in the request's trace (``outbound POST``)."""
    with _span(method, url):
        return await _send(method, url, headers=headers, content=content, policy=policy, pool=pool)


def host_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _span(method: str, url: str) -> AbstractContextManager[None]:
    """The outbound call's span: the host it went to, never the path (it may hold a
    secret) nor the query."""
    return span(
        f"outbound {method}", **{"http.request.method": method, "server.address": host_of(url)}
    )


async def _send(
    method: str,
    url: str,
    *,
    headers: Headers | None,
    content: bytes | None,
    policy: OutboundPolicy,
    pool: AsyncPinnedClients | None = None,
) -> OutboundResponse:
    """Send one request to a user-supplied URL, safely; see the package docstring.

    Raises :class:`OutboundRefused` (nothing was sent) or :class:`OutboundFailed`.  A
    ``pool`` keeps connections alive between sends, each reused only for the same checked
    name and address; without one, the request has a connection of its own.  The total
    deadline (``policy.total_timeout``, resolution included) is a cancel scope: passing
    it fails the send as too slow.
    """
    plan = Plan.make(method, url, headers, content, policy)
    pools = pool or AsyncPinnedClients(size=1, connections=1, keep_alive=False)
    try:
        with anyio.move_on_after(plan.remaining()) as deadline:
            addresses = plan.pin(await resolve(plan))
            if plan.remaining() <= 0:  # a blocking resolver cannot be cancelled
                raise plan.too_slow()
            try:
                return await attempt(
                    plan, addresses, lambda ip: _exchange(plan, pools, ip, deadline)
                )
            except HTTP_ERRORS as exc:
                if deadline.cancel_called:
                    raise plan.too_slow() from exc
                raise plan.failed(exc) from exc
        raise plan.too_slow()
    finally:
        if pool is None:
            await pools.aclose()


def send_sync(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
) -> OutboundResponse:
    """:func:`send` for blocking code (the API's worker threads), with a connection of its
    own: it runs on the one background event loop (:func:`_portal`), so the caller may
    even be inside a running event loop; the total deadline is the same cancel scope."""
    call = functools.partial(_send, method, url, headers=headers, content=content, policy=policy)
    with _span(method, url):  # in the caller's thread: its trace, not the portal's
        return _portal().call(call)


_lock = threading.Lock()
_running: tuple[int, BlockingPortal] | None = None


def _portal() -> BlockingPortal:
    """One event loop on one background thread for every blocking send of this process,
    started on first use (again in a forked child, which has not the parent's thread) and
    stopped at exit, rather than a loop and a thread per send."""
    global _running
    with _lock:
        if _running is None or _running[0] != os.getpid():
            manager = start_blocking_portal()
            _running = (os.getpid(), manager.__enter__())
            atexit.register(manager.__exit__, None, None, None)
        return _running[1]

"""The send path, :func:`send`: ``_async`` is the source, ``_sync`` (the blocking twin,
for the webhook worker's threads) is generated from it by ``python -m tests.unasync``.

What differs beyond ``async`` and ``await`` -- how the total deadline is enforced, how a
resolver is waited for, how a connection is closed -- is in ``_async_io`` / ``_sync_io``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from ..invariant import InvariantError
from ._async_io import AsyncPinnedClients, Deadline, close, resolve
from ._plan import Headers, OutboundResponse, Plan, default_tls_context, take
from ._policy import OutboundPolicy

__all__ = ["send"]


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    if response.is_stream_consumed:  # already in memory (a mock transport, say)
        return response.content[:cap], len(response.content) > cap
    body = bytearray()
    chunks: AsyncIterator[bytes] = response.aiter_raw()
    try:
        async for chunk in chunks:
            if take(body, chunk, cap):
                return bytes(body), True
    finally:
        stop = getattr(chunks, "aclose", None)  # the raw stream's own, if it has one
        if stop is not None:
            await close(stop)
    return bytes(body), False


async def _exchange(
    plan: Plan, http: httpx.AsyncClient, ip: str, deadline: Deadline, *, keep_alive: bool
) -> OutboundResponse:
    response = await http.send(
        plan.request(ip, trace=deadline.trace, keep_alive=keep_alive),
        stream=True,
        follow_redirects=False,
        auth=None,
    )
    try:
        body, truncated = await _read_capped(response, plan.policy.max_response_bytes)
        deadline.disarm()
    finally:
        await close(response.aclose)
    return plan.response(response, body, truncated, ip)


async def _attempt(
    plan: Plan,
    addresses: list[str],
    deadline: Deadline,
    http: httpx.AsyncClient | None,
    pool: AsyncPinnedClients | None,
) -> OutboundResponse:
    """Try the checked addresses in turn; httpx's errors are left to the caller to map."""
    last: httpx.ConnectError | None = None
    for ip in addresses:
        try:
            if pool is not None:
                async with pool.client(plan.pool_key(ip)) as pooled:
                    return await _exchange(plan, pooled, ip, deadline, keep_alive=True)
            if http is None:
                raise InvariantError("expected a client or a pool")
            return await _exchange(plan, http, ip, deadline, keep_alive=False)
        except httpx.ConnectError as exc:
            if deadline.fired or not plan.next_address_worth_trying(exc):
                raise
            last = exc
    if last is None:
        raise InvariantError("expected last is not None")
    raise last


async def send(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
    client: httpx.AsyncClient | None = None,
    pool: AsyncPinnedClients | None = None,
) -> OutboundResponse:
    """Send one request to a user-supplied URL, safely; see the package docstring.

    Raises :class:`OutboundRefused` (nothing was sent) or :class:`OutboundFailed`.  A
    given ``client`` supplies TLS settings (``verify=``) and transports; its redirect,
    auth, cookie, header and timeout defaults are not used.  It must speak HTTP/1.1 and
    have no proxy (both would undo the pinning).  Without one, a fresh client is used for
    this request alone.  A ``pool`` (instead of a client) keeps connections alive
    between sends, each reused only for the same checked name and address.  The total
    deadline (``policy.total_timeout``, resolution included) is enforced by
    :class:`Deadline`; passing it fails the send as too slow.
    """
    plan = Plan.make(method, url, headers, content, policy)
    with Deadline(plan) as deadline:
        addresses = plan.pin(await resolve(plan))
        if plan.remaining() <= 0:
            raise plan.too_slow()
        http = (
            client
            if client is not None or pool is not None
            else httpx.AsyncClient(trust_env=False, verify=default_tls_context())
        )
        try:
            return await _attempt(plan, addresses, deadline, http, pool)
        except httpx.HTTPError as exc:
            if deadline.fired:
                raise plan.too_slow() from exc
            raise plan.failed(exc) from exc
        finally:
            if client is None and http is not None:
                await close(http.aclose)

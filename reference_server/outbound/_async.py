"""The async send path: :func:`send`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import anyio
import httpx

from ..invariant import InvariantError
from ._plan import Headers, OutboundResponse, Plan, default_tls_context, take
from ._policy import OutboundPolicy, system_resolve_async

__all__ = ["send"]


async def _close(aclose: Callable[[], Awaitable[object]]) -> None:
    """Close even when the total deadline has just cancelled us, so no socket leaks."""
    with anyio.move_on_after(1, shield=True):
        await aclose()


async def _read_capped_async(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    if response.is_stream_consumed:  # already in memory (a mock transport, say)
        return response.content[:cap], len(response.content) > cap
    body = bytearray()
    chunks: AsyncIterator[bytes] = response.aiter_raw()
    try:
        async for chunk in chunks:
            if take(body, chunk, cap):
                return bytes(body), True
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await _close(aclose)
    return bytes(body), False


async def _send_pinned_async(plan: Plan, client: httpx.AsyncClient | None) -> OutboundResponse:
    if plan.target.ip is not None:
        answers: Iterable[str] = ()
    else:
        resolver = plan.policy.resolver or system_resolve_async
        try:
            result = resolver(plan.target.host, plan.target.port)
            answers = await result if isinstance(result, Awaitable) else result
        except OSError as exc:
            raise plan.resolve_failed(exc) from exc
    addresses = plan.pin(answers)
    http = (
        client
        if client is not None
        else httpx.AsyncClient(trust_env=False, verify=default_tls_context())
    )
    try:
        last: httpx.ConnectError | None = None
        for ip in addresses:
            try:
                response = await http.send(
                    plan.request(ip), stream=True, follow_redirects=False, auth=None
                )
            except httpx.ConnectError as exc:
                if not plan.next_address_worth_trying(exc):
                    raise plan.failed(exc) from exc
                last = exc
                continue
            except httpx.HTTPError as exc:
                raise plan.failed(exc) from exc
            try:
                body, truncated = await _read_capped_async(response, plan.policy.max_response_bytes)
            except httpx.HTTPError as exc:
                raise plan.failed(exc) from exc
            finally:
                await _close(response.aclose)
            return plan.response(response, body, truncated, ip)
        if last is None:
            raise InvariantError("expected last is not None")
        raise plan.failed(last) from last
    finally:
        if client is None:
            await _close(http.aclose)


async def send(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
    client: httpx.AsyncClient | None = None,
) -> OutboundResponse:
    """Send one request to a user-supplied URL, safely; see the package docstring.

    Raises :class:`OutboundRefused` (nothing was sent) or :class:`OutboundFailed`.  A
    given ``client`` supplies TLS settings (``verify=``) and transports; its redirect,
    auth, cookie, header and timeout defaults are not used.  It must speak HTTP/1.1 and
    have no proxy (both would undo the pinning).  Without one, a fresh client is used for
    this request alone.
    """
    plan = Plan.make(method, url, headers, content, policy)
    with anyio.move_on_after(policy.total_timeout):
        return await _send_pinned_async(plan, client)
    raise plan.too_slow()

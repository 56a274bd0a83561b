"""The streaming send path, :func:`stream`: the answer's body read as it arrives.

A hosted gate relays a streamed answer (server-sent events) to its payer chunk by chunk,
so it cannot wait for the whole body as :func:`~._send.send` does.  The checks, the
pinning and the deadline are :func:`~._send.send`'s up to the answer's head; the body then
has its own bound, ``policy.max_response_bytes`` in all, each chunk within the read
timeout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpcore
import httpx

from ._errors import OutboundFailed
from ._plan import HTTP_ERRORS, Headers, Plan
from ._policy import OutboundPolicy
from ._pool import AsyncPinnedClients
from ._send import attempt, resolve

__all__ = ["OutboundStream", "stream"]


class OutboundStream:
    """An answer whose head has arrived: its status and headers, and :meth:`chunks`."""

    def __init__(self, plan: Plan, response: httpcore.Response, ip: str) -> None:
        self.status = response.status
        self.headers = httpx.Headers(response.headers)
        self.ip = ip
        self._plan = plan
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives.  Raises :class:`OutboundFailed` when the upstream
        fails midway or sends more than ``max_response_bytes`` in all."""
        cap, read = self._plan.policy.max_response_bytes, 0
        try:
            async for chunk in self._response.aiter_stream():
                read += len(chunk)
                if read > cap:
                    raise OutboundFailed(f"{self._plan.target.origin} sent more than {cap} bytes")
                yield chunk
        except HTTP_ERRORS as exc:
            raise self._plan.failed(exc) from exc


@asynccontextmanager
async def stream(
    method: str,
    url: str,
    *,
    headers: Headers | None = None,
    content: bytes | None = None,
    policy: OutboundPolicy,
) -> AsyncIterator[OutboundStream]:
    """Send one request to a user-supplied URL as :func:`~._send.send` does and yield
    its answer once the head is in; the connection is closed on exit.  Raises
    :class:`OutboundRefused` (nothing was sent) or :class:`OutboundFailed`."""
    plan = Plan.make(method, url, headers, content, policy)
    pools = AsyncPinnedClients(size=1, connections=1, keep_alive=False)
    async with AsyncExitStack() as opened:
        opened.push_async_callback(pools.aclose)

        async def open_at(ip: str) -> OutboundStream:
            pool = await opened.enter_async_context(pools.pool(plan, ip))
            response = await pool.handle_async_request(plan.request(keep_alive=False))
            opened.push_async_callback(response.aclose)
            return OutboundStream(plan, response, ip)

        answer: OutboundStream | None = None
        with anyio.move_on_after(plan.remaining()) as deadline:
            addresses = plan.pin(await resolve(plan))
            if plan.remaining() <= 0:  # a blocking resolver cannot be cancelled
                raise plan.too_slow()
            try:
                answer = await attempt(plan, addresses, open_at)
            except HTTP_ERRORS as exc:
                if deadline.cancel_called:
                    raise plan.too_slow() from exc
                raise plan.failed(exc) from exc
        if answer is None:
            raise plan.too_slow()
        yield answer

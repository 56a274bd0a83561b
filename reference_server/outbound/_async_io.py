"""The async send path's own I/O pieces (hand-written; ``_sync_io`` is the blocking twin).

``_async`` imports these by name and ``_sync`` is generated from it, so the two modules
offer the same four names: :class:`Deadline`, :func:`resolve`, :func:`close`,
:func:`pooled`.  They are the part of sending that is not the same code with ``await``
removed: a task can be cancelled when the total deadline passes, a blocking thread cannot.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

import anyio
import httpx

from ._plan import Plan, default_tls_context
from ._policy import system_resolve_async

__all__ = ["Deadline", "close", "pooled", "resolve"]

#: Kept-alive clients per event loop, one per checked origin, least recently used first.
_POOLS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, OrderedDict[tuple[str, str, int], httpx.AsyncClient]
] = weakref.WeakKeyDictionary()
#: Origins kept per event loop, and idle connections kept per origin (and for how long).
POOLED_ORIGINS = 32
_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=8, keepalive_expiry=5.0)


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


async def pooled(plan: Plan) -> httpx.AsyncClient | None:
    """A client that keeps connections alive for the plan's origin, on this event loop.

    One client per (scheme, checked host name, port), never shared between names: its
    requests all carry the same ``sni_hostname``, so a kept TLS connection was verified
    for the very name it is reused for, and since each request's URL is the pinned IP,
    httpcore reuses only a connection to the address this send has just checked (a host
    that now resolves elsewhere gets a new connection there, after the check).  ``None``
    outside asyncio (the caller then uses a fresh client).
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): no pool
        return None
    pool = _POOLS.setdefault(loop, OrderedDict())
    key = (plan.target.scheme, plan.target.host, plan.target.port)
    client = pool.get(key)
    if client is not None:
        pool.move_to_end(key)
        return client
    client = httpx.AsyncClient(trust_env=False, verify=default_tls_context(), limits=_LIMITS)
    pool[key] = client
    while len(pool) > POOLED_ORIGINS:
        _, evicted = pool.popitem(last=False)
        await close(evicted.aclose)
    return client

"""The async send path's own I/O pieces (hand-written; ``_sync_io`` is the blocking twin).

``_async`` imports these by name and ``_sync`` is generated from it, so the two modules
offer the same three names: :class:`Deadline`, :func:`resolve`, :func:`close`.  They are
the part of sending that is not the same code with ``await`` removed: a task can be
cancelled when the total deadline passes, a blocking thread cannot.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

import anyio

from ._plan import Plan
from ._policy import system_resolve_async

__all__ = ["Deadline", "close", "resolve"]


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

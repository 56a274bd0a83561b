"""Rate limits through the ``limits`` library.

Limits are counted per credential (a hash of the presented token, so brute-forcing keys
is limited too) or per client address for anonymous calls.  Storage is in memory for one
process and Redis (``redis://``) when several processes must share counts.  Every
limited route answers with ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
``X-RateLimit-Reset`` (Unix seconds); a refusal is 429 with ``Retry-After``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
import time
from collections import deque
from collections.abc import Mapping

from limits import RateLimitItem, parse_many, storage, strategies

from .. import metrics
from ..invariant import InvariantError
from .errors import ApiError

__all__ = ["RateLimiter"]

#: A limit spec (``"60/minute; 1000/hour"``) read once.
_parsed = functools.cache(parse_many)


class _LocalWindows:
    """Moving windows in this process's memory (``memory://``), as limits' own
    ``MemoryStorage`` keeps them, without its expiry timer: that starts a thread whenever
    the last one has run out (10 ms after it began), so under steady traffic nearly every
    few requests paid a thread start and its hand-over of the GIL -- a tenth of the
    server's CPU per ``pay-url`` on PostgreSQL, whose three requests are each counted.

    Here each key's hits are a deque of times, oldest first: a hit drops those that left
    the window and then counts, and keys idle for longer than their window are swept out
    at most once every :data:`SWEEP_SECONDS`.  A key holds at most ``amount`` times.
    """

    SWEEP_SECONDS = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: key -> (window seconds, times of the hits still in the window)
        self._windows: dict[str, tuple[float, deque[float]]] = {}
        self._swept = time.monotonic()

    def hit(self, key: str, amount: int, seconds: float) -> tuple[bool, float, int]:
        """Count one hit if the window has room: (counted, start of the window, hits in
        it), where the start is the oldest hit still counted (now if none), as limits'
        ``get_moving_window`` answers."""
        now = time.time()
        with self._lock:
            self._sweep(now)
            found = self._windows.get(key)
            if found is None:
                found = self._windows[key] = (seconds, deque())
            hits = found[1]
            while hits and hits[0] <= now - seconds:
                hits.popleft()
            counted = len(hits) < amount
            if counted:
                hits.append(now)
            return counted, hits[0] if hits else now, len(hits)

    def _sweep(self, now: float) -> None:
        if time.monotonic() - self._swept < self.SWEEP_SECONDS:
            return
        self._swept = time.monotonic()
        idle = [
            key
            for key, (seconds, hits) in self._windows.items()
            if not hits or hits[-1] <= now - seconds
        ]
        for key in idle:
            del self._windows[key]


def _headers(limit: int, remaining: int, reset: int) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(reset),
    }


class RateLimiter:
    def __init__(self, storage_uri: str) -> None:
        # A moving window counts every hit in the last N seconds exactly: no burst of twice
        # the limit across a window boundary, and the headers say what a client can rely on.
        self._local = _LocalWindows() if storage_uri.startswith("memory://") else None
        self._limiter = (
            None
            if self._local is not None
            else strategies.MovingWindowRateLimiter(storage.storage_from_string(storage_uri))
        )

    @property
    def blocking(self) -> bool:
        """Whether :meth:`hit` waits on the network (Redis): then it belongs in a worker
        thread; counting in memory takes microseconds, less than the hop to a thread."""
        return self._local is None

    @staticmethod
    def identity(headers: Mapping[str, str], client: str | None) -> str:
        token = headers.get("authorization") or headers.get("x-svc-vw-key")
        if token:
            return "cred:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        return f"addr:{client or 'unknown'}"

    def hit(self, spec: str, namespace: str, identity: str) -> dict[str, str]:
        """Count one request; return the headers to add, or raise 429."""
        tightest: tuple[int, int, int] | None = None  # limit, remaining, reset
        for item in _parsed(spec):
            allowed, reset_time, remaining = self._count(item, namespace, identity)
            reset = math.ceil(reset_time)
            if not allowed:
                metrics.rate_limited(namespace)
                retry_after = max(1, math.ceil(reset_time - time.time()))
                raise ApiError(
                    "rate_limited",
                    f"Rate limit of {item.amount} per {item.get_expiry()} s exceeded; "
                    f"retry after {retry_after} s.",
                    headers={"Retry-After": str(retry_after), **_headers(item.amount, 0, reset)},
                )
            if tightest is None or remaining < tightest[1]:
                tightest = (item.amount, remaining, reset)
        return {} if tightest is None else _headers(*tightest)

    def _count(self, item: RateLimitItem, namespace: str, identity: str) -> tuple[bool, float, int]:
        """Hit one limit: (counted, when the window resets, hits left in it)."""
        if self._local is not None:
            seconds = item.get_expiry()
            counted, start, used = self._local.hit(
                item.key_for(namespace, identity), item.amount, seconds
            )
            return counted, start + seconds, max(0, item.amount - used)
        if self._limiter is None:
            raise InvariantError("a rate limiter needs its storage")
        allowed = self._limiter.hit(item, namespace, identity)
        stats = self._limiter.get_window_stats(item, namespace, identity)
        return allowed, stats.reset_time, stats.remaining

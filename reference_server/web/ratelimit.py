"""Rate limits through the ``limits`` library.

Limits are counted per credential (a hash of the presented token, so brute-forcing keys
is limited too) or per client address for anonymous calls.  Storage is in memory for one
process and Redis (``redis://``) when several processes must share counts.  Every
limited route answers with ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
``X-RateLimit-Reset`` (Unix seconds); a refusal is 429 with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping

from limits import RateLimitItem, parse_many, storage, strategies

from .errors import ApiError

__all__ = ["RateLimiter"]


class RateLimiter:
    def __init__(self, storage_uri: str) -> None:
        self._storage = storage.storage_from_string(storage_uri)
        # A moving window counts every hit in the last N seconds exactly: no burst of twice
        # the limit across a window boundary, and the headers say what a client can rely on.
        self._limiter = strategies.MovingWindowRateLimiter(self._storage)
        self._parsed: dict[str, list[RateLimitItem]] = {}

    @property
    def blocking(self) -> bool:
        """Whether :meth:`hit` waits on the network (Redis): then it belongs in a worker
        thread; counting in memory takes microseconds, less than the hop to a thread."""
        return not isinstance(self._storage, storage.MemoryStorage)

    def _items(self, spec: str) -> list[RateLimitItem]:
        if spec not in self._parsed:
            self._parsed[spec] = parse_many(spec)
        return self._parsed[spec]

    @staticmethod
    def identity(headers: Mapping[str, str], client: str | None) -> str:
        token = headers.get("authorization") or headers.get("x-svc-vw-key")
        if token:
            return "cred:" + hashlib.sha256(token.encode()).hexdigest()[:32]
        return f"addr:{client or 'unknown'}"

    def hit(self, spec: str, namespace: str, identity: str) -> dict[str, str]:
        """Count one request; return the headers to add, or raise 429."""
        headers: dict[str, str] = {}
        tightest: tuple[int, int, int] | None = None  # remaining, limit, reset
        for item in self._items(spec):
            allowed = self._limiter.hit(item, namespace, identity)
            stats = self._limiter.get_window_stats(item, namespace, identity)
            reset = math.ceil(stats.reset_time)
            if not allowed:
                retry_after = max(1, math.ceil(stats.reset_time - time.time()))
                raise ApiError(
                    "rate_limited",
                    f"Rate limit of {item.amount} per {item.get_expiry()} s exceeded; "
                    f"retry after {retry_after} s.",
                    headers={
                        "Retry-After": str(retry_after),
                        "X-RateLimit-Limit": str(item.amount),
                        "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset": str(reset),
                    },
                )
            if tightest is None or stats.remaining < tightest[0]:
                tightest = (stats.remaining, item.amount, reset)
        if tightest is not None:
            headers = {
                "X-RateLimit-Limit": str(tightest[1]),
                "X-RateLimit-Remaining": str(tightest[0]),
                "X-RateLimit-Reset": str(tightest[2]),
            }
        return headers

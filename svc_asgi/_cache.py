"""The gate's caches: :class:`LruCache` (expiring entries) and :class:`FlightCache`
(single-flight misses), both on ``cachetools.LRUCache``.

Why cache: a gate sits on the hot path of every paid request, and the answer to "is
``rcpt_x`` good for ``res_y``?" does not change from one request to the next.  Caching
it for ``ttl`` seconds makes a repeat request cost a dict lookup instead of a round trip
to the service.  Single flight covers the moment before the cache is warm: when fifty
requests arrive at once with the same new receipt, one of them asks the service and the
other forty-nine wait for that answer, so a burst never becomes a burst on the service.

Answers are cached, failures are not (a service that was down must be asked again).
When the asking request is cancelled (its client went away), one of the waiters asks
instead; when it fails, the waiters get the same failure rather than retrying in a
stampede.  Entries are bounded, least recently used first out, so a flood of distinct
forged receipts cannot grow memory without limit, and cannot push out the hot entries a
busy gate keeps using either: the bound evicts one cold entry at a time.

Expiry is checked here, on top of ``LRUCache``, rather than by cachetools' ``TLRUCache``:
a fresh hit took 1.2-4.1 us through ``TLRUCache.get`` and 0.3-0.5 us through
:meth:`LruCache.get`, 4-8 times as long in each run (``python bench/library_choices.py``,
see docs/performance.md), and a gate makes one such lookup on every paid request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio
from cachetools import LRUCache

__all__ = ["FlightCache", "LruCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A bounded map whose entries expire: ``get`` refreshes recency, ``put`` past
    ``max_entries`` drops the least recently used entry, an expired entry reads as absent
    (and is dropped).  Expiry is per entry, as clock time (``float("inf")``: never)."""

    __slots__ = ("_clock", "_entries")

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._clock = clock
        self._entries: LRUCache[K, tuple[float, V]] = LRUCache(max_entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value if present and not expired, now the most recently used."""
        try:  # one lookup on a hit (``LRUCache.get`` asks ``in`` first)
            entry = self._entries[key]
        except KeyError:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def expiry(self, key: K) -> float | None:
        """When the entry for ``key`` expires (clock time), ``None`` if there is none."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, expires: float = float("inf")) -> None:
        self._entries[key] = (expires, value)

    def clear(self) -> None:
        self._entries.clear()


class _Flight(Generic[V]):
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        #: ``(value,)`` once loaded: a one-item tuple, so a loaded ``None`` is still a value.
        self.result: tuple[V] | None = None
        self.error: BaseException | None = None


class FlightCache(Generic[K, V]):
    """``await cache.get(key, load)``: a fresh cached value, or one shared ``load()``."""

    def __init__(
        self,
        *,
        ttl: float,
        ttl_for: Callable[[V], float] | None = None,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl < 0:
            raise ValueError("ttl must be >= 0 seconds")
        self._ttl = ttl
        self._ttl_for = ttl_for
        self._clock = clock
        self._entries: LruCache[K, V] = LruCache(max_entries, clock)
        self._flights: dict[K, _Flight[V]] = {}

    def peek(self, key: K) -> V | None:
        """The cached value if still fresh (no loading)."""
        return self._entries.get(key)

    def expiry(self, key: K) -> float | None:
        """When the cached entry for ``key`` expires (clock time), ``None`` if none."""
        return self._entries.expiry(key)

    def clear(self) -> None:
        self._entries.clear()

    async def get(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        cached = self.peek(key)
        if cached is not None:
            return cached
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, load)
            await flight.done.wait()
            if flight.result is not None:
                return flight.result[0]
            if isinstance(flight.error, Exception):
                raise flight.error
            # The leader was cancelled (not a failure of the load): lead ourselves.

    async def _lead(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        flight: _Flight[V] = _Flight()
        self._flights[key] = flight
        try:
            value = await load()
        except BaseException as exc:
            flight.error = exc
            raise
        else:
            flight.result = (value,)
            self._store(key, value)
            return value
        finally:
            del self._flights[key]
            flight.done.set()

    def _store(self, key: K, value: V) -> None:
        ttl = self._ttl if self._ttl_for is None else min(self._ttl, self._ttl_for(value))
        if ttl > 0:
            self._entries.put(key, value, self._clock() + ttl)

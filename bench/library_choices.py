"""What a library missed where the code keeps its own piece: one figure per kept piece,
each measured beside the library's way in the same run.

Run: ``python bench/library_choices.py`` (about 10 s; needs the ``[server]`` extras).

- **gate cache lookup** (``svc_asgi/_cache.py``): a fresh hit through cachetools'
  ``TLRUCache.get`` (expiry per entry, the library's own) against ``LruCache.get``
  (cachetools' ``LRUCache`` with the expiry checked on top), the lookup a gate makes on
  every paid request.
- **routing** (``reference_server/web/routing.py``): finding the route of ``POST
  /spend/pay-url`` and ``POST /pay`` in the app's own route table by Starlette's scan
  (every route's ``matches`` in turn, as ``Router`` does) against ``IndexedRouter``'s
  index (the few routes that can match the path).

Each figure is the best of five repeats of many calls (the least disturbed by other work
on the machine), in nanoseconds or microseconds per call.
"""

from __future__ import annotations

import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cachetools import TLRUCache
from starlette.routing import BaseRoute, Match

from reference_server.app import create_app
from reference_server.settings import Settings
from reference_server.web.routing import IndexedRouter
from svc_asgi._cache import LruCache


def per_call(call: Callable[[], object], number: int) -> float:
    """Seconds per call, the best of five repeats."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number


def cache_lookups() -> tuple[float, float]:
    """(TLRUCache.get, LruCache.get) for a fresh hit, in seconds."""
    expires = time.monotonic() + 3600
    library: TLRUCache[str, tuple[float, int]] = TLRUCache(
        10_000, ttu=lambda _key, entry, _now: entry[0], timer=time.monotonic
    )
    library["rcpt"] = (expires, 1)
    ours: LruCache[str, int] = LruCache(10_000)
    ours.put("rcpt", 1, expires)
    return (
        per_call(lambda: library.get("rcpt"), 200_000),
        per_call(lambda: ours.get("rcpt"), 200_000),
    )


def _scan(routes: list[BaseRoute], scope: dict[str, Any]) -> BaseRoute | None:
    for route in routes:
        if route.matches(scope)[0] is Match.FULL:
            return route
    return None


def routing(path: str) -> tuple[float, float]:
    """(Starlette's scan, the index) to find the route of ``POST path``, in seconds."""
    never_opened = Path(tempfile.gettempdir()) / "library-choices-never-opened.db"
    app = create_app(Settings(database_url=f"sqlite:///{never_opened}", auto_migrate=False))
    router = app.router
    assert isinstance(router, IndexedRouter)
    routes = list(router.routes)
    scope = {"type": "http", "method": "POST", "path": path, "root_path": ""}
    found = _scan(routes, scope)
    assert found is not None and _scan(router._by_path[path], scope) is found
    return (
        per_call(lambda: _scan(routes, scope), 5_000),
        per_call(lambda: _scan(router._by_path[path], scope), 50_000),
    )


def main() -> None:
    library, ours = cache_lookups()
    print(
        f"gate cache fresh hit: TLRUCache.get {library * 1e9:.0f} ns, "
        f"LruCache.get {ours * 1e9:.0f} ns"
    )
    for path in ("/spend/pay-url", "/pay"):
        scan, indexed = routing(path)
        print(
            f"routing POST {path}: Starlette's scan {scan * 1e6:.1f} us, "
            f"index {indexed * 1e6:.2f} us"
        )


if __name__ == "__main__":
    main()

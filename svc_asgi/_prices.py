"""Which resource a request needs: the price table.

A gate is configured with a mapping from what is sold to the service's resource ids::

    {
        "GET /v1/report": "res_…",        # one method and path
        "/v1/items/{item_id}": "res_…",   # any method; {name} is one path segment
        "/v1/files/{rest:path}": "res_…", # {name:path} is the rest of the path
        "mcp:search": "res_…",            # the MCP tool "search"
    }

Matching errs on the side of charging, because a request that slips past a price is
revenue given away and a request charged by mistake is only a visible 402:

* ``GET`` also prices ``HEAD`` (ASGI frameworks answer ``HEAD`` with the ``GET`` route);
* a trailing slash does not escape a price (``/v1/report/`` is ``/v1/report``);
* a typed parameter such as ``{id:int}`` matches any one segment, a superset of what the
  framework's converter accepts.

A price may be a :class:`Route` instead of a bare id, to say *when* a paid answer is
settled: ``Route("res_…", settle="after_body")`` settles a fixed price once the whole body
is out (a metered resource always is), and ``on_failure`` says what a stream the app
aborts after its first byte costs.  The options belong to the resource id, so two prices
naming one resource must agree on them.

Exact paths are looked up first (a dict lookup, the fast path); patterns are tried next,
in the order given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

import attrs

__all__ = ["PriceTable", "Route"]

Settle = Literal["on_start", "after_body"]
OnFailure = Literal["settle", "release"]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z_]+))?\}")
_TOOL_PREFIX = "mcp:"


def _trim(path: str) -> str:
    return path[:-1] if len(path) > 1 and path.endswith("/") else path


def _compile(path: str) -> re.Pattern[str] | None:
    """A regex for a path with ``{params}``, ``None`` for a literal path."""
    if not _PARAM.search(path):
        return None
    parts: list[str] = []
    last = 0
    for m in _PARAM.finditer(path):
        parts.append(re.escape(path[last : m.start()]))
        parts.append(".*" if m.group(2) == "path" else "[^/]+")
        last = m.end()
    parts.append(re.escape(path[last:]))
    return re.compile("".join(parts))


@attrs.frozen
class Route:
    """A price with its settlement options (a bare resource id means the defaults).

    ``settle``: ``"on_start"`` settles a fixed price when the answer starts (its status
    known, below 400), ``"after_body"`` once its last byte is out; a metered resource is
    always settled after the body, with the units the app reported.  ``on_failure``:
    what an answer the app aborts after its first byte costs: ``"settle"`` (the usage
    reported so far; the default) or ``"release"`` (nothing).
    """

    resource_id: str
    settle: Settle = attrs.field(default="on_start", kw_only=True)
    on_failure: OnFailure = attrs.field(default="settle", kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.resource_id, str) or not self.resource_id:
            raise ValueError("Route needs a resource id")
        if self.settle not in ("on_start", "after_body"):
            raise ValueError('settle must be "on_start" or "after_body"')
        if self.on_failure not in ("settle", "release"):
            raise ValueError('on_failure must be "settle" or "release"')


@attrs.frozen
class _Pattern:
    methods: frozenset[str] | None
    regex: re.Pattern[str]
    resource_id: str


class PriceTable:
    """The gate's prices, compiled once: routes and MCP tools to resource ids."""

    def __init__(self, prices: Mapping[str, str | Route]) -> None:
        if not isinstance(prices, Mapping) or not prices:
            raise ValueError("prices must be a non-empty mapping of routes/tools to resource ids")
        self._exact: dict[str, dict[str | None, str]] = {}
        self._patterns: list[_Pattern] = []
        self.tools: dict[str, str] = {}
        #: The options of every resource priced with a :class:`Route` (others: defaults).
        self.routes: dict[str, Route] = {}
        for key, price in prices.items():
            route = price if isinstance(price, Route) else None
            resource_id = price.resource_id if isinstance(price, Route) else price
            if not isinstance(key, str) or not isinstance(resource_id, str) or not resource_id:
                raise ValueError(f"price {key!r}: keys and resource ids must be non-empty strings")
            if route is not None and self.routes.setdefault(resource_id, route) != route:
                raise ValueError(f"price {key!r}: {resource_id} is priced with other options")
            self._add(key.strip(), resource_id)
        # What match_route answers for every (method, path) an exact price names, a trailing
        # slash included: the hot path of every priced request is then one dictionary lookup.
        #: Read directly by a gate's hot path (a miss then asks :meth:`match_route`).
        self.exact_routes: dict[tuple[str, str], str] = {}
        for path, slot in self._exact.items():
            spellings = (path, path + "/") if path != "/" else (path,)
            for method in _METHODS:
                found = slot.get(method) or slot.get(None)
                if found is not None:
                    for spelling in spellings:
                        self.exact_routes[method, spelling] = found

    def _add(self, key: str, resource_id: str) -> None:
        if key.startswith(_TOOL_PREFIX):
            tool = key[len(_TOOL_PREFIX) :].strip()
            if not tool:
                raise ValueError(f"price {key!r}: name the tool after 'mcp:'")
            self.tools[tool] = resource_id
            return
        method: str | None
        if " " in key:
            method, _, path = key.partition(" ")
            method, path = method.upper(), path.strip()
            if method not in _METHODS:
                raise ValueError(f"price {key!r}: {method!r} is not an HTTP method")
        else:
            method, path = None, key
        if not path.startswith("/"):
            raise ValueError(f"price {key!r}: write 'METHOD /path', '/path' or 'mcp:tool'")
        methods = (
            None if method is None else frozenset({method, "HEAD"} if method == "GET" else {method})
        )
        regex = _compile(_trim(path))
        if regex is None:
            slot = self._exact.setdefault(_trim(path), {})
            for m in methods or (None,):
                slot.setdefault(m, resource_id)
        else:
            self._patterns.append(_Pattern(methods, regex, resource_id))

    def match_route(self, method: str, path: str) -> str | None:
        """The resource id that ``method path`` must be paid for, ``None`` if it is free."""
        known = self.exact_routes.get((method, path))
        if known is not None:
            return known
        trimmed = _trim(path)
        slot = self._exact.get(trimmed)
        if slot is not None:
            found = slot.get(method) or slot.get(None)
            if found is not None:
                return found
        for pattern in self._patterns:
            if pattern.methods is not None and method not in pattern.methods:
                continue
            # Both spellings: ``{rest:path}`` may match an empty rest after a slash.
            if pattern.regex.fullmatch(trimmed) or pattern.regex.fullmatch(path):
                return pattern.resource_id
        return None

    def route(self, resource_id: str) -> Route:
        """The settlement options of ``resource_id``."""
        return self.routes.get(resource_id) or Route(resource_id)

    def match_tool(self, name: str) -> str | None:
        """The resource id of the MCP tool ``name``, ``None`` if the tool is free."""
        return self.tools.get(name)

    @property
    def resource_ids(self) -> frozenset[str]:
        ids = {r for slot in self._exact.values() for r in slot.values()}
        ids.update(p.resource_id for p in self._patterns)
        ids.update(self.tools.values())
        return frozenset(ids)

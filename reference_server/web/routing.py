"""The application's router: Starlette's, without trying every route for every request.

Starlette's ``Router`` asks each route in turn whether its pattern matches the path, a
regular expression apiece: this app has 138 routes (each path bare and under
``/api``), and ``POST /spend/pay-url`` is the 103rd, the sandbox facilitator's
``/sandbox/x402/verify`` and ``/settle`` (which every test payment calls) the 99th and
101st.  Profiled (yappi, CPU clock) a pay-url made 303 ``Route.matches`` calls -- its own
request and the facilitator's two -- the largest self time of any function in the server.
Timed alone (``python bench/library_choices.py``, docs/performance.md): routing
``/spend/pay-url`` took 73-159 us by the scan and 1.1-3.3 us by the index, ``/pay`` (the
71st) 54-104 us and 1.9-3.3 us, 20-65 times as long by the scan in each run.

:class:`IndexedRouter` answers the same as Starlette's: a request for a path in its index
is tried against only the routes whose patterns match that very path, in their order;
any other request is routed by Starlette as before.  ``routes`` counts its changes (the
bench and tests change it after construction), so a request checks one number to know
the index is current.

Its trailing-slash redirect (``/buy/abc/`` -> ``/buy/abc``, when only the other form is a
route) answers a *relative* ``Location``: Starlette's names the request's ``Host`` header,
which the client chooses, so a request with ``Host: evil.example`` was sent on to
``http://evil.example/...`` (a cache or a proxy in front could serve that to others).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import quote

from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import Receive, Scope, Send

__all__ = ["IndexedRouter"]

#: A path with no parameter, as Starlette's ``compile_path`` leaves it unchanged.
_STATIC = re.compile(r"^/[^{}]*$")


class _RouteList(list[BaseRoute]):
    """A list of routes that counts every change made to it (``changes``), so the
    router knows its index is stale without comparing the routes."""

    changes = 0


def _counting(name: str) -> Callable[..., Any]:
    """``list``'s method ``name``, counting the change it makes."""
    change = getattr(list, name)

    def method(self: _RouteList, *args: Any, **kwargs: Any) -> Any:
        result = change(self, *args, **kwargs)
        self.changes += 1
        return result

    return method


_CHANGES = (
    "__setitem__ __delitem__ __iadd__ __imul__ append extend insert pop remove clear reverse sort"
)
for _name in _CHANGES.split():
    setattr(_RouteList, _name, _counting(_name))


class IndexedRouter(Router):
    """Starlette's ``Router``, dispatching a request for a path without parameters to
    the few routes whose patterns match it (see the module)."""

    _routes: _RouteList
    _indexed_at = -1  # the ``changes`` of ``routes`` that ``_by_path`` was built from
    _by_path: dict[str, list[BaseRoute]]

    def __init__(
        self, routes: Sequence[BaseRoute], *, redirect_slashes: bool = True, **options: Any
    ) -> None:
        # Starlette's own redirect is off; :meth:`not_found` makes a relative one.
        super().__init__(routes, redirect_slashes=False, **options)
        self.relative_slash_redirects = redirect_slashes
        self._reindex()

    async def not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Starlette's trailing-slash redirect, with a relative ``Location`` (see the
        module); otherwise Starlette's 404."""
        if scope["type"] == "http" and self.relative_slash_redirects:
            location = _slash_twin(self._routes, scope)
            if location is not None:
                await RedirectResponse(location)(scope, receive, send)
                return
        await super().not_found(scope, receive, send)

    @property
    def routes(self) -> list[BaseRoute]:
        return self._routes

    @routes.setter
    def routes(self, routes: Iterable[BaseRoute]) -> None:
        self._routes = _RouteList(routes)
        self._indexed_at = -1

    def _reindex(self) -> None:
        self._by_path, self._indexed_at = _index(self._routes), self._routes.changes

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        candidates = None
        if scope["type"] == "http":
            if self._routes.changes != self._indexed_at:  # routes changed since
                self._reindex()
            candidates = self._by_path.get(_route_path(scope))
        if candidates is None:
            await super().app(scope, receive, send)
            return
        if "router" not in scope:
            scope["router"] = self
        partial: tuple[BaseRoute, Scope] | None = None
        for route in candidates:  # Router.app's loop, over the routes that can match
            match, child_scope = route.matches(scope)
            if match is Match.FULL:
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
            if match is Match.PARTIAL and partial is None:
                partial = route, child_scope
        if partial is None:  # none can match after all: Starlette's own way out
            await super().app(scope, receive, send)
            return
        route, child_scope = partial
        scope["route"] = route
        scope.update(child_scope)
        await route.handle(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path routes match: ``path`` less the ``root_path`` the app is mounted under,
    computed as Starlette's own routes do (``tests/server/test_routing.py`` compares the
    two routers under a root path)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root or not path.startswith(root):
        return path
    if path == root:
        return ""
    return path[len(root) :] if path[len(root)] == "/" else path


def _index(routes: Sequence[BaseRoute]) -> dict[str, list[BaseRoute]]:
    """Each static route path -> every route, in order, that may match that path: those
    whose pattern matches it, and any route without a pattern to ask (kept, to be asked)."""
    paths = [r.path for r in routes if isinstance(r, Route) and _STATIC.match(r.path)]
    index: dict[str, list[BaseRoute]] = {}
    patterns = [(route, getattr(route, "path_regex", None)) for route in routes]
    for path in paths:
        index[path] = [route for route, regex in patterns if regex is None or regex.match(path)]
    return index


def _slash_twin(routes: Sequence[BaseRoute], scope: Scope) -> str | None:
    """The relative URL of the request's path with its trailing slash added or removed,
    when a route matches that path (as Starlette's ``Router`` decides); else ``None``.
    Never ``//...``, which a browser reads as another host."""
    if _route_path(scope) == "/":
        return None
    path = str(scope["path"])
    twin = dict(scope, path=path.rstrip("/") if path.endswith("/") else path + "/")
    if not any(route.matches(twin)[0] is not Match.NONE for route in routes):
        return None
    location = "/" + quote(str(twin["path"]).lstrip("/"), safe="/:@!$&'()*+,;=~")
    query = scope.get("query_string", b"")
    return f"{location}?{query.decode('latin-1')}" if query else location

"""The app's router (``web.routing.IndexedRouter``) routes every request as Starlette's
own ``Router`` does: the same route, the same 405 with its ``Allow``, the same
trailing-slash redirect (but to a relative ``Location``: tests/server/test_redirects.py),
the same 404."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.testclient import TestClient
from starlette.types import Scope

from reference_server.web.routing import IndexedRouter

from ..support import unopened_app

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")


def _answering(path: str, methods: set[str] | None) -> Route:
    """A route that says which it is."""

    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(path)

    return Route(path, endpoint, methods=sorted(methods) if methods else None)


def _answers(router: Router, paths: list[str], root_path: str = "") -> list[tuple[object, ...]]:
    app = Starlette()
    app.router = router
    with TestClient(app, root_path=root_path) as client:
        return [
            (path, method, r.status_code, r.text, r.headers.get("allow"), _relative(r))
            for path in paths
            for method in METHODS
            for r in [client.request(method, path, follow_redirects=False)]
        ]


def _relative(r: Any) -> str | None:
    """The ``Location`` without the scheme and host Starlette's own redirect names."""
    location = r.headers.get("location")
    return None if location is None else str(location).removeprefix("http://testserver")


def _same_answers(routes: list[BaseRoute], paths: list[str], root_path: str = "") -> None:
    indexed = _answers(IndexedRouter(routes), paths, root_path)
    assert indexed == _answers(Router(routes), paths, root_path)


def test_shadowed_and_overlapping_routes() -> None:
    routes = [
        ("/sellers/{seller_id}", {"GET"}),
        ("/sellers/me", {"GET", "POST"}),  # shadowed for GET by the pattern before it
        ("/pay", {"POST"}),
        ("/items/{n:int}", None),
        ("/items/7", {"GET"}),
        ("/docs/", {"GET"}),
        ("/pay", {"GET"}),  # a second route for one path: asked only after the first
    ]
    paths = ["/sellers/me", "/sellers/x", "/pay", "/pay/", "/items/7", "/items/x", "/docs"]
    _same_answers([_answering(p, m) for p, m in routes], [*paths, "/docs/", "/nope", "/"])


def test_under_a_root_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mounted under ``root_path``, a path is routed by what follows the root (the router
    computes that itself, as Starlette's routes do), and found in the index."""
    routes = [_answering("/pay", {"POST"}), _answering("/docs/", {"GET"}), _answering("/", None)]
    paths = ["/mnt/pay", "/mnt/pay/", "/mnt", "/mnt/", "/mntpay", "/pay", "/mnt/docs", "/x/pay"]
    _same_answers(routes, paths, root_path="/mnt")
    scanned: list[str] = []
    scan = Router.app

    async def counted(self: Router, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scanned.append(scope["path"])
        await scan(self, scope, receive, send)

    monkeypatch.setattr(Router, "app", counted)
    _answers(IndexedRouter(routes), ["/mnt/pay", "/mnt/docs/", "/mnt/"], root_path="/mnt")
    assert scanned == []


@pytest.mark.parametrize("sandbox", [True, False])
def test_the_apps_own_routes(sandbox: bool) -> None:
    app = unopened_app(sandbox_enabled=sandbox)
    assert isinstance(app.router, IndexedRouter)
    table = [r for r in app.routes if isinstance(r, Route)]
    paths = [re.sub(r"\{[^}]*\}", "x", r.path) for r in table]
    paths += [p + "/" for p in paths] + ["/nope", "/api"]
    _same_answers([_answering(r.path, r.methods) for r in table], sorted(set(paths)))


def test_routes_added_after_construction_are_indexed() -> None:
    """A route put in front of the table later (as bench/_baseline_server.py does) serves
    its path, and the routes behind it still serve theirs."""
    router = IndexedRouter([_answering("/pay", {"POST"}), _answering("/docs", {"GET"})])
    assert ("/pay", "POST", 200, "/pay", None, None) in _answers(router, ["/pay"])
    router.routes[0:0] = [_answering("/_bench/commit", {"POST"}), _answering("/pay", {"GET"})]
    added = _answers(router, ["/_bench/commit", "/pay", "/docs"])
    assert added == _answers(Router(list(router.routes)), ["/_bench/commit", "/pay", "/docs"])
    assert ("/_bench/commit", "POST", 200, "/_bench/commit", None, None) in added
    assert ("/pay", "GET", 200, "/pay", None, None) in added


class _Asked(Route):
    """A route that counts how often the router asks it whether it matches."""

    asked = 0

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        type(self).asked += 1
        return super().matches(scope)


def test_a_static_path_is_matched_against_its_own_routes_only_even_after_routes_are_added() -> None:
    async def endpoint(request: Request) -> Response:
        return PlainTextResponse("ok")

    others = [_Asked(f"/r{n}", endpoint, methods=["GET"]) for n in range(20)]
    router = IndexedRouter([*others, Route("/last", endpoint, methods=["GET"])])
    router.routes[0:0] = [Route("/first", endpoint, methods=["POST"])]
    _Asked.asked = 0
    assert _answers(router, ["/last"])[0][2] == 200
    assert _Asked.asked == 0  # a scan would have asked all 20, for each method


@pytest.mark.parametrize(
    "change",
    [
        lambda routes, new: routes.__setitem__(0, new),  # swapped in place
        lambda routes, new: routes.__setitem__(slice(0, 1), [new]),
        lambda routes, new: routes.insert(0, new) or routes.pop(1),  # same length again
    ],
    ids=["item", "slice", "insert-then-pop"],
)
def test_a_route_replaced_in_place_is_served(change: Any) -> None:
    """The number of routes is unchanged, yet the new route serves its path."""
    router = IndexedRouter([_answering("/pay", {"POST"}), _answering("/docs", {"GET"})])
    assert _answers(router, ["/pay"])[0][:3] == ("/pay", "GET", 405)
    change(router.routes, _answering("/pay", {"GET"}))
    assert len(router.routes) == 2
    assert _answers(router, ["/pay", "/docs"]) == _answers(
        Router(list(router.routes)), ["/pay", "/docs"]
    )
    assert ("/pay", "GET", 200, "/pay", None, None) in _answers(router, ["/pay"])


def test_a_new_route_list_assigned_is_served() -> None:
    router = IndexedRouter([_answering("/pay", {"POST"})])
    router.routes = [_answering("/pay", {"GET"})]
    assert ("/pay", "GET", 200, "/pay", None, None) in _answers(router, ["/pay"])

"""No redirect the app answers names the ``Host`` a request sent.

Generated from the route table: every route's path, with and without a trailing slash
(the slash twin is what the router redirects), bare and under ``/api``, by GET and POST,
sent to a real server with ``Host: evil.example``.  A redirect's ``Location`` is relative
(``/buy/abc``), never another host: not ``http://evil.example/...`` as Starlette's own
redirect answered, nor ``//...`` or ``/\\...``, which a browser reads as another host.
"""

from __future__ import annotations

import re

import httpx
from starlette.routing import Route

from ..support import LiveServer

EVIL = "evil.example"
#: Paths that try to turn a relative redirect into another host's.
SNEAKY = ["//evil.example/", "/%2F%2Fevil.example/", "/%5Cevil.example/", "//pay/x/", "///pay/x/"]


def _paths(live: LiveServer) -> list[str]:
    table = [r.path for r in live.server.config.app.routes if isinstance(r, Route)]
    concrete = [re.sub(r"\{[^}]*\}", "x", path) for path in table]
    twins = [p.rstrip("/") if p.endswith("/") else p + "/" for p in concrete]
    return sorted({*concrete, *twins, *SNEAKY})


def test_no_redirect_names_the_host_header(server: LiveServer) -> None:
    redirects, problems = 0, []
    with httpx.Client(base_url=server.url, headers={"Host": EVIL}, timeout=30) as client:
        for path in _paths(server):
            for method in ("GET", "POST"):
                r = client.request(method, path, follow_redirects=False)
                location = r.headers.get("location")
                if location is None:
                    continue
                redirects += 1
                if (
                    EVIL in location
                    or not location.startswith("/")
                    or location.startswith(("//", "/\\"))
                ):
                    problems.append(f"{method} {path}: {r.status_code} Location: {location}")
    assert not problems, "\n".join(problems)
    routes = [r for r in server.server.config.app.routes if isinstance(r, Route)]
    assert redirects >= len(routes)  # every route's slash twin was redirected


def test_the_redirect_keeps_the_query_and_lands_on_the_route(server: LiveServer) -> None:
    r = httpx.get(
        server.url + "/api/buy/abc/?x=1&y=%C3%A9", headers={"Host": EVIL}, follow_redirects=False
    )
    assert r.status_code == 307 and r.headers["location"] == "/api/buy/abc?x=1&y=%C3%A9"
    followed = httpx.get(server.url + r.headers["location"])
    assert followed.status_code == 404 and "Payment page not found" in followed.text

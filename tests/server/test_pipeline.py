"""One request pipeline: every route the app serves is an ``Endpoint`` dispatched by
``web.pipeline.dispatch``, and its cross-cutting rules hold on the routes that used to
re-implement them (the gates, pay-url, the gate rails, the probes).

The route table is read from the Starlette app itself, so a raw route cannot creep back.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import httpx
import pytest
from sqlalchemy.exc import OperationalError
from starlette.routing import Route

from reference_server.app import served
from reference_server.web.endpoint import API_PREFIX, Contract, Endpoint, Flow, Page, routes_for
from reference_server.web.pipeline import dispatch

from ..support import Account, LiveServer, new_account, unopened_app


@pytest.mark.parametrize("sandbox", [True, False])
def test_every_route_is_an_endpoint_of_the_one_pipeline(sandbox: bool) -> None:
    app = unopened_app(sandbox_enabled=sandbox)
    bare: dict[str, set[str]] = {}
    prefixed: dict[str, set[str]] = {}
    for route in app.routes:
        assert isinstance(route, Route), f"{route!r} is not a pipeline route"
        serve = route.endpoint
        assert isinstance(serve, functools.partial) and serve.func is dispatch, route.path
        (methods,) = serve.args
        assert all(isinstance(ep, Endpoint) for ep in methods.values())
        assert {ep.path for ep in methods.values()} == {route.path.removeprefix(API_PREFIX)}
        assert set(methods) | {"HEAD"} == route.methods | {"HEAD"}, route.path
        table = prefixed if route.path.startswith(API_PREFIX + "/") else bare
        table[route.path.removeprefix(API_PREFIX)] = set(methods)
    assert bare == prefixed  # every route also under /api, mounted in one place
    assert {(ep.method, ep.path) for ep in served(sandbox_routes=sandbox)} <= {
        (m, p) for p, ms in bare.items() for m in ms
    }


def test_a_page_implies_its_defaults_and_refuses_contradictions() -> None:
    async def form(call: object) -> None:
        return None

    ep = Endpoint(method="POST", path="/p", handler=form, page=Page())
    assert isinstance(ep.run, Flow) and not ep.contract.listed and ep.body is not None
    routes_for([ep])
    with pytest.raises(Exception, match="a page runs as a Flow"):
        routes_for(
            [Endpoint(method="GET", path="/p", handler=form, page=Page(), contract=Contract())]
        )


def test_discovery_lists_only_served_endpoints(server: LiveServer) -> None:
    """Every listed operation is a route that answers (no documentation-only entries)."""
    paths = httpx.get(server.url + "/agent-openapi.json").json()["paths"]
    listed = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    expected = {(ep.method, ep.path) for ep in served() if ep.contract.listed}
    assert listed == expected
    for path in ("/gates/redeem", "/spend/pay-url", "/g/{short_id}", "/demo/echo"):
        assert path in paths


def test_a_gate_failing_unexpectedly_is_a_500_envelope_logged_once(
    server: LiveServer, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from reference_server.routes.gates import hosted as gates

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(gates, "find_gate_by_short_id", boom)
    with caplog.at_level(logging.ERROR, logger="reference_server"):
        r = httpx.get(server.url + "/g/abcd1234")
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["error"]["code"] == "internal_error"
    assert body["request_id"] == r.headers["x-request-id"]
    assert "disk on fire" not in r.text
    assert "x-ratelimit-limit" in r.headers  # the rate limit still answered its headers
    logged = [rec for rec in caplog.records if "unhandled error" in rec.getMessage()]
    assert len(logged) == 1 and "/g/{short_id}" in logged[0].getMessage()


def test_an_unreachable_database_is_503_not_ready_on_every_kind_of_route(
    server: LiveServer, monkeypatch: Any
) -> None:
    """The same rule for a sync API route as for an async gate route."""
    from reference_server.routes import sellers
    from reference_server.routes.gates import hosted as gates

    def down(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    account = new_account(server.url)
    monkeypatch.setattr(sellers.sellers, "list_sellers", down)
    monkeypatch.setattr(gates, "find_gate_by_short_id", down)
    for r in (
        httpx.get(
            server.url + "/sellers", headers={"Authorization": f"Bearer {account.owner_jwt}"}
        ),
        httpx.get(server.url + "/g/abcd1234"),
    ):
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "not_ready"


def test_pay_url_authenticates_before_reading_the_order(server: LiveServer) -> None:
    """pay-url takes the pipeline's order: who calls first, then what they ask."""
    r = httpx.post(server.url + "/spend/pay-url", json={"url": "not a url"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"


def test_probes_and_documents_are_not_rate_limited(server: LiveServer) -> None:
    for path in ("/health", "/ready", "/llms.txt", "/api/health"):
        r = httpx.get(server.url + path)
        assert r.status_code == 200 and "x-ratelimit-limit" not in r.headers, path
    r = httpx.get(server.url + "/demo/echo")
    assert r.status_code == 402 and "x-ratelimit-limit" in r.headers


def test_a_body_in_another_media_type_is_a_documented_415(
    server: LiveServer, account: Account
) -> None:
    """Found by schemathesis: every route that reads a JSON body answers 415 to any other
    media type (the pipeline's ``read_json_body``), so the document says so."""
    r = httpx.post(
        server.url + "/resources",
        content=b"kind=http",
        headers={
            "Authorization": f"Bearer {account.seller_key}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    answers = httpx.get(server.url + "/agent-openapi.json").json()["paths"]["/resources"]["post"]
    assert "`unsupported_media_type`" in answers["responses"]["415"]["description"]

"""Hosted gates (``gate_url`` = ``/g/{short_id}``) and ``/demo/echo`` on the gate core:
402, paid answers, forwarding to an upstream, and SSRF refusals in production."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import svc
from reference_server.routes.gates.hosted import UPSTREAM_MAX_RESPONSE_BYTES

from ..support import LiveApp, LiveServer, free_port
from .support import open_shop


class Upstream:
    """A seller's upstream on loopback that records what reaches it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            self.seen.append(
                {
                    "method": request.method,
                    "path": request.url.path,
                    "query": request.url.query,
                    "headers": dict(request.headers),
                    "body": (await request.body()).decode(),
                }
            )
            return JSONResponse(
                {"upstream": True},
                status_code=201,
                headers={"X-Upstream": "yes", "Set-Cookie": "session=upstream"},
            )

        async def big(request: Request) -> Response:
            return Response(b"x" * (UPSTREAM_MAX_RESPONSE_BYTES + 1))

        return Starlette(
            routes=[
                Route("/hook", hook, methods=["GET", "POST", "PUT", "DELETE"]),
                Route("/big", big),
            ]
        )


@pytest.fixture
def upstream(serve_app: Callable[..., LiveApp]) -> tuple[Upstream, LiveApp]:
    recorder = Upstream()
    return recorder, serve_app(recorder.app())


def test_hosted_gate_without_upstream(server: LiveServer) -> None:
    shop = open_shop(server, price="0.25", metadata={"sku_kind": "one_shot", "tier": "gold"})
    gate_url = shop.resource.gate_url
    assert gate_url == f"{server.url}/g/{shop.resource.short_id}"
    r = httpx.get(gate_url)
    assert r.status_code == 402 and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert r.headers["x-request-id"] == body["request_id"]
    details = body["error"]["details"]
    assert details["resource_id"] == shop.resource.id and details["amount"] == "0.25"
    assert details["gate_url"] == gate_url and details["pay_url"] == shop.resource.pay_url
    assert "x-ratelimit-limit" in r.headers

    paid = shop.agent.pay(resource_id=shop.resource.id)
    for method, shown in (
        ("GET", paid.receipt_id),
        ("POST", paid.receipt_id),
        ("DELETE", paid.receipt_id),
        ("GET", paid.receipt_token),  # the signed token, checked against the service's keys
    ):
        ok = httpx.request(method, gate_url, headers={"X-Svc-Receipt": str(shown)})
        assert ok.status_code == 200, ok.text
        assert ok.headers["x-svc-receipt"] == paid.receipt_id
        data = ok.json()
        assert data["ok"] is True and data["paid"] is True
        assert data["receipt"]["receipt_id"] == paid.receipt_id
        assert data["receipt"]["amount"] == "0.25" and data["receipt"]["environment"] == "test"
        assert data["resource"]["id"] == shop.resource.id
        assert data["resource"]["metadata"]["tier"] == "gold"
        assert "seller_id" not in data["resource"] and "upstream_url" not in data["resource"]
    api = httpx.get(f"{server.url}/api/g/{shop.resource.short_id}")
    assert api.status_code == 402


def test_refusals_of_a_hosted_gate(server: LiveServer) -> None:
    shop = open_shop(server)
    other = shop.seller.resources.create(kind="http", path="/other", amount="0.01")
    paid_other = shop.agent.pay(resource_id=other.id)
    r = httpx.get(shop.resource.gate_url, headers={"X-Svc-Receipt": paid_other.receipt_id})
    assert r.status_code == 402 and "another resource" in r.json()["error"]["message"]
    r = httpx.get(shop.resource.gate_url, headers={"X-Svc-Receipt": "rcpt_forged000000000"})
    assert r.status_code == 402 and r.json()["error"]["details"]["reason"] == "receipt_refused"
    r = httpx.get(shop.resource.gate_url, headers={"X-Svc-Receipt": str(paid_other.receipt_token)})
    assert r.status_code == 402
    assert r.json()["error"]["details"]["refused_because"] == "wrong_resource"
    r = httpx.get(shop.resource.gate_url, headers={"PAYMENT-RESPONSE": "!!"})
    assert r.status_code == 402 and r.json()["error"]["details"]["reason"] == "receipt_malformed"
    for short_id in ("nosuchgate1", "bad!id"):
        r = httpx.get(f"{server.url}/g/{short_id}")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    shop.seller.resources.deactivate(other.id)
    r = httpx.get(other.gate_url, headers={"X-Svc-Receipt": paid_other.receipt_id})
    assert r.status_code == 409 and r.json()["error"]["code"] == "resource_inactive"


def test_a_paid_request_is_forwarded_to_the_upstream(
    server: LiveServer, upstream: tuple[Upstream, LiveApp]
) -> None:
    recorder, live = upstream
    shop = open_shop(server, upstream_url=f"{live.url}/hook?fixed=1")
    unpaid = httpx.post(shop.resource.gate_url, content=b"hello")
    assert unpaid.status_code == 402 and recorder.seen == []  # nothing forwarded unpaid

    paid = shop.agent.pay(resource_id=shop.resource.id)
    r = httpx.post(
        shop.resource.gate_url + "?a=b",
        content=b'{"q": "owls"}',
        headers={
            "X-Svc-Receipt": paid.receipt_id,
            "Authorization": "Bearer svc_vw_test_secret",
            "Cookie": "svc_session=1",
            "Content-Type": "application/json",
            "X-Custom": "kept",
            "Connection": "keep-alive, X-Dropped",
            "X-Dropped": "hop-by-hop by Connection",
        },
    )
    assert r.status_code == 201, r.text
    assert r.json() == {"upstream": True}
    assert r.headers["x-upstream"] == "yes"
    assert "set-cookie" not in r.headers  # never set cookies on the service's domain
    assert r.headers["x-svc-receipt"] == paid.receipt_id
    assert r.headers["cache-control"] == "private"
    [seen] = recorder.seen
    assert seen["method"] == "POST" and seen["path"] == "/hook"
    assert seen["query"] == "fixed=1&a=b" and seen["body"] == '{"q": "owls"}'
    headers = seen["headers"]
    assert headers["x-custom"] == "kept" and headers["content-type"] == "application/json"
    for secret in ("authorization", "cookie", "x-svc-receipt", "x-dropped"):
        assert secret not in headers, secret
    assert headers["x-svc-verified-receipt"] == paid.receipt_id
    assert headers["x-svc-resource-id"] == shop.resource.id
    assert headers["x-request-id"] == r.headers["x-request-id"]


def test_upstream_failures_are_502(server: LiveServer, upstream: tuple[Upstream, LiveApp]) -> None:
    _, live = upstream
    big = open_shop(server, upstream_url=f"{live.url}/big")
    paid = big.agent.pay(resource_id=big.resource.id)
    r = httpx.get(big.resource.gate_url, headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_too_large"
    assert r.json()["request_id"] == r.headers["x-request-id"]

    down = open_shop(server, upstream_url=f"http://127.0.0.1:{free_port()}/gone")
    paid = down.agent.pay(resource_id=down.resource.id)
    r = httpx.get(down.resource.gate_url, headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unavailable"


@pytest.mark.parametrize(
    "upstream_url",
    [
        "https://upstream.example.com/hook",  # a name resolving to loopback
        "https://127.0.0.1/hook",
        "https://10.0.0.7/admin",
        "https://169.254.169.254/latest/meta-data/",
    ],
)
def test_production_refuses_internal_upstreams(
    make_server: Callable[..., LiveServer],
    upstream: tuple[Upstream, LiveApp],
    upstream_url: str,
) -> None:
    from sqlalchemy import update

    from reference_server.store import tables as t

    recorder, live = upstream
    port = int(live.url.rsplit(":", 1)[1])
    url = upstream_url.replace("upstream.example.com", f"upstream.example.com:{port}")

    def resolver(host: str, _port: int) -> list[str]:
        return ["127.0.0.1"] if host == "upstream.example.com" else []

    prod = make_server(env="production", signup_enabled=True, outbound_resolver=resolver)
    names_a_host = "upstream.example.com" in url
    if not names_a_host:
        # An address literal is refused when the resource is created...
        with pytest.raises(svc.UnprocessableEntityError) as refused:
            open_shop(prod, upstream_url=url)
        assert refused.value.details is not None
        assert refused.value.details["errors"][0]["field"] == "upstream_url"
    # ...and, like a name that resolves to an internal address (checked only when
    # forwarding), refused again at every forward: here a row written before the rule.
    shop = open_shop(prod, upstream_url=url if names_a_host else "https://example.com/x")
    if not names_a_host:
        r_ = t.resources
        with prod.ctx.db.write() as conn:
            conn.execute(update(r_).where(r_.c.id == shop.resource.id).values(upstream_url=url))
    paid = shop.agent.pay(resource_id=shop.resource.id)
    r = httpx.get(shop.resource.gate_url, headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_refused"
    assert "/hook" not in error["message"] and "meta-data" not in error["message"]
    assert recorder.seen == []


def test_demo_echo_runs_on_the_gate_core(server: LiveServer) -> None:
    shop = open_shop(server)
    r = httpx.get(server.url + "/demo/echo", headers={"X-Svc-Environment": "test"})
    assert r.status_code == 402
    details = r.json()["error"]["details"]
    assert details["reason"] == "receipt_missing" and details["environment"] == "test"
    paid = shop.agent.pay(resource_id=details["resource_id"])
    for path in ("/demo/echo", "/api/demo/echo"):
        ok = httpx.get(server.url + path, headers={"X-Svc-Receipt": paid.receipt_id})
        assert ok.status_code == 200, ok.text
        assert ok.headers["x-svc-receipt"] == paid.receipt_id
        assert ok.json()["receipt"]["receipt_id"] == paid.receipt_id
    r = httpx.post(server.url + "/demo/echo")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    r = httpx.get(server.url + "/demo/echo", headers={"X-Svc-Environment": "moon"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_environment"


def test_discovery_lists_the_gates(server: LiveServer) -> None:
    llms = httpx.get(server.url + "/llms.txt").text
    assert "- GET /demo/echo (auth: none)" in llms
    assert "- GET /g/{short_id} (auth: none)" in llms
    paths = httpx.get(server.url + "/agent-openapi.json").json()["paths"]
    assert set(paths["/g/{short_id}"]) == {"get", "post"}
    assert "get" in paths["/demo/echo"]

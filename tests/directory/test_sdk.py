"""The directory through the SDK (both clients, against a live server), and the issue's
flow: an agent finds a listed POST resource, copies its ``body_hint`` with its own values
into ``pay-url``, and the seller's upstream gets that body, paid."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import svc

from ..payurl.helpers import make_agent
from ..rails.helpers import open_rail_shop
from ..support import LiveApp, LiveServer, new_account
from .helpers import DEMO_SELLER


def _mine(entries: list[svc.DirectoryEntry]) -> list[svc.DirectoryEntry]:
    return [e for e in entries if e.seller_name != DEMO_SELLER]


def test_sync_client_lists_and_pages(server: LiveServer) -> None:
    account = new_account(server.url)
    seller = svc.Client(base_url=server.url, seller_key=account.seller_key, max_retries=0)
    made = [
        seller.resources.create(
            kind="http",
            path=f"/v1/r{i}",
            amount="0.05",
            description=f"Report {i}",
            listed=True,
            method="POST",
            body_hint={"n": i},
        )
        for i in range(3)
    ]
    seller.resources.create(kind="http", path="/hidden", amount="0.05")
    assert made[0].method == "POST" and made[0].body_hint == {"n": 0}

    anyone = svc.Client(base_url=server.url, environment="test", max_retries=0)
    page = anyone.directory.list(limit=2)
    assert isinstance(page, svc.DirectoryList) and page.has_more is True
    every = _mine(list(anyone.directory.list_all(limit=2)))
    assert [e.id for e in every] == [r.id for r in made]
    entry = every[1]
    assert isinstance(entry, svc.DirectoryEntry)
    assert (entry.amount, entry.method, entry.body_hint) == (Decimal("0.05"), "POST", {"n": 1})
    assert entry.rails == ["rill"] and entry.gate_url == made[1].gate_url
    assert [e.id for e in anyone.directory.list(q="report 2").data] == [made[2].id]
    assert _mine(anyone.directory.list(kind="mcp").data) == []
    assert len(_mine(anyone.directory.list(max_amount="0.05").data)) == 3
    assert _mine(anyone.directory.list(max_amount=Decimal("0.01")).data) == []
    with pytest.raises(svc.UnprocessableEntityError):
        anyone.directory.list(q="")
    live = svc.Client(base_url=server.url, environment="live", max_retries=0)
    assert _mine(live.directory.list().data) == []

    updated = seller.resources.update(made[0].id, method="GET", body_hint=None)
    assert (updated.method, updated.body_hint) == ("GET", None)
    updated = seller.resources.update(made[0].id, method=None)
    assert updated.method is None
    kept = seller.resources.update(made[1].id, amount="0.06")
    assert (kept.method, kept.body_hint) == ("POST", {"n": 1})


@pytest.mark.anyio
async def test_async_client_lists(server: LiveServer) -> None:
    account = new_account(server.url)
    async with svc.AsyncClient(
        base_url=server.url, seller_key=account.seller_key, max_retries=0
    ) as seller:
        made = await seller.resources.create(
            kind="mcp", tool="search", amount="0.5", listed=True, description="Search"
        )
    async with svc.AsyncClient(base_url=server.url, environment="test") as anyone:
        page = await anyone.directory.list(kind="mcp")
        assert [e.id for e in page.data] == [made.id]
        every = [e async for e in anyone.directory.list_all(limit=1, q="search")]
        assert [e.id for e in every] == [made.id]


class Upstream:
    """The seller's API behind the hosted gate: records each JSON body it is sent."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def app(self) -> Starlette:
        async def forecast(request: Request) -> Response:
            body = json.loads(await request.body())
            self.bodies.append(body)
            return JSONResponse({"forecast": f"sunny in {body['city']}", "days": body["days"]})

        return Starlette(routes=[Route("/forecast", forecast, methods=["POST"])])


def test_pay_url_copying_the_body_hint_pays_it(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    upstream = Upstream()
    api = serve_app(upstream.app())
    shop = open_rail_shop(server, price="0.20", upstream_url=f"{api.url}/forecast")
    shop.seller.resources.update(
        shop.resource.id,
        listed=True,
        method="POST",
        body_hint={"city": "Lisbon", "days": 7},
        description="Weather forecast",
    )
    agent = make_agent(server, fund="1.00")
    finder = svc.Client(base_url=server.url, environment="test", max_retries=0)

    [entry] = [e for e in finder.directory.list_all(q="forecast")]
    assert entry.method == "POST" and entry.body_hint == {"city": "Lisbon", "days": 7}
    assert set(entry.rails) == {"x402", "mpp", "rill"}
    mine = {**entry.body_hint, "city": "Porto", "days": 3}
    with pytest.raises(svc.UnprocessableEntityError) as wrong:  # GET: 405, nothing to pay
        agent.client.spend.pay_url(entry.gate_url)
    assert "405" in str(wrong.value), str(wrong.value)

    paid = agent.client.spend.pay_url(entry.gate_url, method=entry.method, json=mine)

    assert paid.amount == Decimal("0.20") and paid.rail in ("x402", "mpp")
    assert paid.json() == {"forecast": "sunny in Porto", "days": 3}
    assert upstream.bodies == [mine]
    assert agent.spend().balance == Decimal("0.80")

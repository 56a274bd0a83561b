"""The examples in docs/examples/gate_*.py run as documented, and docs/gate.md shows them
verbatim."""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from svc_asgi import RECEIPT_META_KEY

from ..rails.helpers import funded_payer
from ..rails.streaming import read_events, upto_client, upto_credential
from ..support import LiveApp, LiveServer
from .support import Shop, open_shop

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("gate_*.py"))


def load(
    name: str, monkeypatch: pytest.MonkeyPatch, server: LiveServer, shop: Shop, **env: str
) -> Any:
    for key, value in {
        "SVC_BASE_URL": server.url,
        "SVC_SELLER_KEY": shop.seller_key,
        **env,
    }.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(EXAMPLES / name), run_name=name.removesuffix(".py"))["app"]


def _report_cycle(app: LiveApp, shop: Shop, method: str = "GET") -> None:
    r = httpx.request(method, app.url + "/v1/report")
    assert r.status_code == 402, r.text
    assert r.json()["error"]["details"]["resource_id"] == shop.resource.id
    paid = shop.agent.pay(resource_id=shop.resource.id)
    r = httpx.request(method, app.url + "/v1/report", headers={"X-Svc-Receipt": paid.receipt_id})
    assert r.status_code == 200, r.text
    assert r.json() == {"report": "all systems nominal", "receipt_id": paid.receipt_id}


@pytest.mark.parametrize("name", ["gate_starlette.py", "gate_bare_asgi.py"])
def test_report_examples(
    name: str,
    server: LiveServer,
    serve_app: Callable[..., LiveApp],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shop = open_shop(server)
    app = serve_app(load(name, monkeypatch, server, shop, REPORT_RESOURCE_ID=shop.resource.id))
    _report_cycle(app, shop)
    if name == "gate_bare_asgi.py":  # priced for any method
        _report_cycle(app, shop, method="POST")


def test_fastapi_example(
    server: LiveServer, serve_app: Callable[..., LiveApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = open_shop(server)
    credits = shop.seller.resources.create(
        kind="http",
        path="/v1/credits",
        amount="1.00",
        metadata={"sku_kind": "credit_topup", "credits": 50, "credit_unit": "reports"},
    )
    ids = {"REPORT_RESOURCE_ID": shop.resource.id, "CREDITS_RESOURCE_ID": credits.id}
    app = serve_app(load("gate_fastapi.py", monkeypatch, server, shop, **ids))
    _report_cycle(app, shop)
    assert httpx.post(app.url + "/v1/credits?user=ada").status_code == 402
    paid = shop.agent.pay(resource_id=credits.id)
    for _ in range(2):  # the same receipt counts once
        r = httpx.post(app.url + "/v1/credits?user=ada", headers={"X-Svc-Receipt": paid.receipt_id})
        assert r.status_code == 200 and r.json() == {"balance": 50}
    assert httpx.get(app.url + "/docs").status_code == 200  # unpriced routes untouched


def test_mcp_example(
    server: LiveServer, serve_app: Callable[..., LiveApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    shop = open_shop(server, kind="mcp", path=None, tool="search")
    app = serve_app(
        load("gate_mcp.py", monkeypatch, server, shop, SEARCH_RESOURCE_ID=shop.resource.id)
    )
    paid = shop.agent.pay(resource_id=shop.resource.id)

    async def run() -> tuple[Any, Any, Any]:
        async with Client(app.url + "/mcp") as client:
            return (
                await client.call_tool("search", {"query": "owls"}),
                await client.call_tool(
                    "search", {"query": "owls"}, meta={RECEIPT_META_KEY: paid.receipt_id}
                ),
                await client.call_tool("ping", {}),
            )

    unpaid, ok, pong = anyio.run(run)
    assert unpaid.is_error and shop.resource.id in unpaid.content[0].text
    assert not ok.is_error and paid.receipt_id in ok.content[0].text
    assert pong.content[0].text == "pong"


def _answer(events: list[tuple[float, str]]) -> tuple[list[str], dict[str, Any]]:
    """The tokens of an SSE answer and its final ``svc-receipt`` event's data."""
    *tokens, final = [text for _, text in events]
    name, data = final.split("\n", 1)
    assert name == "event: svc-receipt", final
    return [t.removeprefix("data: ") for t in tokens], json.loads(data.removeprefix("data: "))


def test_metered_example(
    server: LiveServer, serve_app: Callable[..., LiveApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven tokens at 0.0001 settle 0.0007 after the last one, whether paid by the
    official x402 client's ``upto`` or by a ledger receipt holding the 0.50 maximum."""
    shop = open_shop(server)
    chat = shop.seller.resources.create(
        kind="http",
        path="/v1/chat",
        pricing="metered",
        unit_price="0.0001",
        unit="token",
        max_amount="0.50",
    )
    shop.seller.sellers.enable_payments()
    app = serve_app(load("gate_metered.py", monkeypatch, server, shop, CHAT_RESOURCE_ID=chat.id))
    url = app.url + "/v1/chat"
    said = ["the", "owls", "are", "not", "what", "they", "seem"]

    async def paid_by_upto() -> list[tuple[float, str]]:
        credential = await upto_credential(url, upto_client(funded_payer(server)))
        return (await read_events(url, credential))[0]

    tokens, receipt = _answer(anyio.run(paid_by_upto))
    assert tokens == said
    assert (receipt["units"], receipt["amount"], receipt["rail"]) == (7, "0.0007", "x402")

    paid = shop.agent.pay(resource_id=chat.id)  # holds the maximum, captured at the end
    events, _ = anyio.run(read_events, url, {"X-Svc-Receipt": paid.receipt_id})
    tokens, receipt = _answer(events)
    assert tokens == said
    assert (receipt["receipt_id"], receipt["units"], receipt["amount"]) == (
        paid.receipt_id,
        7,
        "0.0007",
    )
    assert shop.agent.receipts.get(paid.receipt_id).status == "settled"


def test_docs_show_every_example_verbatim() -> None:
    """Each ``<!-- example: docs/examples/x.py -->`` marker in docs/gate.md is followed by
    a python block equal to the file, and every gate example appears."""
    doc = (ROOT / "docs" / "gate.md").read_text()
    blocks = dict(
        re.findall(
            r"<!-- example: (docs/examples/gate_\w+\.py) -->\n```python\n(.*?)```", doc, re.S
        )
    )
    assert sorted(blocks) == [f"docs/examples/{p.name}" for p in EXAMPLE_FILES]
    for path, shown in blocks.items():
        assert shown == (ROOT / path).read_text(), f"{path} differs from docs/gate.md"

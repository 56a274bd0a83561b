"""The examples in docs/examples/gate_*.py run as documented, and docs/gate.md shows them
verbatim."""

from __future__ import annotations

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

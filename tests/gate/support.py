"""Serving an app behind the gate on a real uvicorn server, and counting what it asks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import attrs
import httpx

import svc

from ..support import LiveServer, new_account


class CountingTransport(httpx.AsyncBaseTransport):
    """The real network, counting requests by ``METHOD /path`` (optionally slowed down so
    that concurrent requests overlap)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: Counter[str] = Counter()
        self.delay = delay

    def count(self, prefix: str) -> int:
        return sum(n for call, n in self.calls.items() if call.startswith(prefix))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls[f"{request.method} {request.url.path}"] += 1
        if self.delay:
            await anyio.sleep(self.delay)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def seller_client(
    base_url: str, seller_key: str, transport: httpx.AsyncBaseTransport | None = None
) -> svc.AsyncClient:
    return svc.AsyncClient(
        base_url=base_url, seller_key=seller_key, transport=transport, max_retries=0
    )


@attrs.frozen
class Shop:
    """A seller (key and client) selling one resource, and a funded agent (another owner)."""

    seller_key: str
    seller: svc.Client
    agent: svc.Client
    resource: svc.Resource


def open_shop(
    live: LiveServer,
    *,
    price: str = "0.05",
    kind: str = "http",
    path: str | None = "/v1/report",
    tool: str | None = None,
    metadata: dict[str, Any] | None = None,
    upstream_url: str | None = None,
    fund: str = "100.00",
) -> Shop:
    sellers = new_account(live.url)
    agents = new_account(live.url)
    seller = svc.Client(base_url=live.url, seller_key=sellers.seller_key, max_retries=0)
    resource = seller.resources.create(
        kind=kind,  # type: ignore[arg-type]
        path=path if kind == "http" else None,
        tool=tool,
        amount=price,
        metadata=metadata,
        upstream_url=upstream_url,
    )
    owner = svc.Client(
        base_url=live.url, owner_jwt=agents.owner_jwt, environment="test", max_retries=0
    )
    key = owner.wallet_keys.create(name="agent")
    owner.wallet_keys.fund(key.id, fund)
    agent = svc.Client(base_url=live.url, wallet_key=key.key, max_retries=0)
    return Shop(seller_key=sellers.seller_key, seller=seller, agent=agent, resource=resource)

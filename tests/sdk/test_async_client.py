"""What only ``svc.AsyncClient`` does: async lifecycle, real async sleeps, concurrency.

Every behaviour it shares with ``svc.Client`` runs on both twins in ``test_client.py``
and ``test_retry.py``.
"""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import httpx
import pytest
from sdk_support import SELLER_KEY, ok

import svc
from svc._retry import RetryPolicy

pytestmark = pytest.mark.anyio

HEALTH = {"status": "ok"}
RESOURCE = {
    "id": "res_1",
    "short_id": "r1",
    "kind": "http",
    "amount": "0.05",
    "gate_url": "g",
    "pay_url": "p",
    "path_or_tool": "/a",
}


async def test_async_context_manager_closes_its_own_http_client() -> None:
    async with svc.AsyncClient(transport=httpx.MockTransport(lambda r: ok(HEALTH))) as client:
        assert (await client.health()).status == "ok"
    assert client._http.is_closed


async def test_a_passed_in_http_client_is_left_open() -> None:
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: ok(HEALTH)))
    async with svc.AsyncClient(http_client=http) as client:
        assert (await client.health()).status == "ok"
    assert not http.is_closed
    await http.aclose()


async def test_transport_and_http_client_are_exclusive() -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(svc.ConfigurationError):
            svc.AsyncClient(transport=httpx.MockTransport(lambda r: ok()), http_client=http)


async def test_async_handler_and_default_anyio_sleep() -> None:
    replies = [httpx.Response(503), ok(HEALTH)]

    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.lowlevel.checkpoint()
        return replies.pop(0)

    policy = RetryPolicy(initial_delay=0.001)
    async with svc.AsyncClient(transport=httpx.MockTransport(handler), retry_policy=policy) as c:
        health = await c.health()

    assert health.status == "ok"
    assert replies == []


async def test_cancellation_interrupts_a_retry_wait() -> None:
    """A long ``Retry-After`` must not outlive the caller's deadline."""
    transport = httpx.MockTransport(
        lambda r: httpx.Response(429, json={}, headers={"Retry-After": "30"})
    )
    async with svc.AsyncClient(transport=transport) as client:
        with anyio.move_on_after(0.05) as scope:
            await client.health()
    assert scope.cancelled_caught


async def test_concurrent_calls_get_their_own_idempotency_keys() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok(RESOURCE, status=201)

    async with svc.AsyncClient(
        seller_key=SELLER_KEY, transport=httpx.MockTransport(handler)
    ) as client:

        async def create(n: int) -> None:
            await client.resources.create(kind="http", path=f"/r{n}", amount="0.05")

        async with anyio.create_task_group() as tg:
            for n in range(10):
                tg.start_soon(create, n)

    assert len({r.headers["idempotency-key"] for r in seen}) == 10
    assert {json.loads(r.content)["path"] for r in seen} == {f"/r{n}" for n in range(10)}

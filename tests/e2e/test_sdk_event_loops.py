"""One ``svc.AsyncClient`` used from one asyncio event loop after another, against the
reference server on loopback: httpx's kept-alive connections belong to the loop that
opened them."""

from __future__ import annotations

import asyncio

import httpx

import svc

from ..support import LiveServer


def test_its_own_client_follows_each_new_event_loop(server: LiveServer) -> None:
    """``asyncio.run`` again and again with one module-level client: each run is a new
    loop, and the connection kept alive by the last one (its loop closed) is not reused."""
    client = svc.AsyncClient(base_url=server.url, max_retries=0)
    for _ in range(3):
        assert asyncio.run(client.health()).status == "ok"
    asyncio.run(client.aclose())
    assert client._http.is_closed


def test_a_client_passed_in_is_used_as_given(server: LiveServer) -> None:
    """An ``http_client=`` and what it is bound to are its owner's: it is used as given,
    and left open."""
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    client = svc.AsyncClient(base_url=server.url, http_client=http, max_retries=0)

    async def twice() -> None:
        assert (await client.health()).status == "ok"
        assert (await client.health()).status == "ok"
        await client.aclose()
        assert not http.is_closed
        await http.aclose()  # in its loop, by its owner

    asyncio.run(twice())
    assert len(seen) == 2

"""Helpers for the SDK client tests: scripted transport, both client twins, responses.

A :class:`Twin` is :class:`svc.Client` or :class:`svc.AsyncClient` (the ``twin`` fixture
in conftest gives each test both), wired to an :class:`httpx.MockTransport` that replays
scripted replies, so every behaviour the two clients share is tested on both without
writing it twice.  Scenarios are ``async`` tests; for the sync twin ``await twin.call(...)``
simply calls the blocking method (the mock transport does no real I/O).

This module has a distinctive name because ``tests/sdk`` has no ``__init__.py``: pytest
puts the directory on ``sys.path``, and a generic name could clash with another suite's.
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import pytest

import svc

SVC_ENV_VARS = (
    "SVC_BASE_URL",
    "SVC_OWNER_JWT",
    "SVC_SELLER_KEY",
    "SVC_WALLET_KEY",
    "SVC_ENVIRONMENT",
)
OWNER_JWT = "owner.jwt.token"
SELLER_KEY = "svc_sk_test_seller"
WALLET_KEY = "svc_vw_test_wallet"
#: A route's role -> the credential it is sent with; and a client holding all three.
CREDENTIAL = {"owner": OWNER_JWT, "seller": SELLER_KEY, "wallet": WALLET_KEY}
ALL_CREDENTIALS = {"owner_jwt": OWNER_JWT, "seller_key": SELLER_KEY, "wallet_key": WALLET_KEY}

E = TypeVar("E", bound=BaseException)
#: A scripted reply: a response, an exception the transport raises, or a function.
Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


def ok(body: dict[str, Any] | None = None, *, status: int = 200, **headers: str) -> httpx.Response:
    """A success response shaped like the service's (``ok`` and ``request_id`` included)."""
    payload = {"ok": True, "request_id": "req_ok", **(body or {})}
    return httpx.Response(status, json=payload, headers=headers)


def fail(
    status: int,
    code: str,
    message: str = "nope",
    *,
    details: dict[str, Any] | None = None,
    request_id: str | None = "req_err",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """An error response in the spec's envelope."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    body: dict[str, Any] = {"ok": False, "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return httpx.Response(status, json=body, headers=headers)


def body_of(request: httpx.Request) -> Any:
    """The request's JSON body, ``None`` when it has none."""
    return json.loads(request.content) if request.content else None


def check_request(
    request: httpx.Request,
    route: str,
    role: str | None,
    body: Any,
    environment: str | None = None,
) -> None:
    """The shape every route's request shares, checked once for every endpoint table: the
    route (``"METHOD /path?query"``), the role's credential (none without a role), the JSON
    body (no content type without one), the environment header; a GET has no body and no
    idempotency key, a write an automatic uuid4 one."""
    method, _, target = route.partition(" ")
    path, _, query = target.partition("?")
    assert request.method == method
    assert request.url.path == path
    assert request.url.query.decode() == query
    if role is None:
        assert "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == f"Bearer {CREDENTIAL[role]}"
    assert body_of(request) == body
    if body is None:
        assert request.content == b""
        assert "content-type" not in request.headers
    else:
        assert request.headers["content-type"] == "application/json"
    assert request.headers.get("x-svc-environment") == environment
    if method == "GET":
        assert "idempotency-key" not in request.headers
    else:
        assert len(request.headers["idempotency-key"]) == 36  # a uuid4


class Twin:
    """One of the two clients plus a scripted transport, recorded requests and sleeps."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []
        self._replies: deque[Reply] = deque()

    def reply(self, *replies: Reply) -> None:
        """Queue replies; each request consumes one, in order."""
        self._replies.extend(replies)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self._replies:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        reply = self._replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        return reply(request)

    def client(self, **kwargs: Any) -> Any:
        """A client of this twin's kind wired to the scripted transport and fake sleep."""
        transport = httpx.MockTransport(self._handle)
        if self.kind == "sync":
            return svc.Client(transport=transport, sleep=self.sleeps.append, **kwargs)

        async def sleep(delay: float) -> None:
            self.sleeps.append(delay)

        return svc.AsyncClient(transport=transport, sleep=sleep, **kwargs)

    async def call(self, client: Any, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(client)``, awaiting it for the async twin."""
        result = fn(client)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def raises(
        self, client: Any, fn: Callable[[Any], Any], error: type[E], match: str | None = None
    ) -> E:
        """Run ``fn(client)``, which must raise ``error`` (matching ``match``); the error."""
        with pytest.raises(error, match=match) as caught:
            await self.call(client, fn)
        return caught.value

    async def refuses(
        self,
        client: Any,
        fn: Callable[[Any], Any],
        error: type[Exception],
        match: str | None = None,
    ) -> None:
        """``fn(client)`` raises ``error`` (matching ``match``) before any request is sent."""
        await self.raises(client, fn, error, match)
        assert self.requests == []

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

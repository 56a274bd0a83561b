"""The double: a Starlette app serving the Stripe endpoints localstripe lacks, forwarding
the rest to a real localstripe, with Stripe's idempotency, faults on demand and a log of
every API request (see ``control.py`` for the ``/_double/`` control API)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from . import control
from .api import Call, route
from .errors import StripeError
from .forms import decode_form
from .state import State, Stored

__all__ = ["build_app"]

#: Headers not passed on when forwarding (the client and transport own them).
_HOP = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


def _fault_body(status: int) -> bytes:
    kind = {429: "rate_limit_error", 500: "api_error", 503: "api_error"}.get(status, "api_error")
    code = "rate_limit" if status == 429 else None
    message = {
        429: "Too many requests hit the API too quickly.",
    }.get(status, "An unknown error occurred (injected by the Stripe double).")
    return json.dumps(
        {"error": {"type": kind, "code": code, "message": message, "param": None}}
    ).encode()


class Api:
    """``/v1/...``: idempotency, then the double's own handler or localstripe."""

    def __init__(self, state: State, http: httpx.AsyncClient) -> None:
        self.state = state
        self.http = http

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.answer(request)
        await response(scope, receive, send)

    async def answer(self, request: Request) -> Response:
        body = await request.body()
        method, path = request.method, request.url.path
        account = request.headers.get("stripe-account")
        key = request.headers.get("idempotency-key")
        params = decode_form(body) if method != "GET" else decode_form(request.url.query)
        slot = (account, key) if key is not None and method == "POST" else None
        if slot is not None:
            stored = self.state.idempotent.get(slot)
            if stored is not None:
                if (stored.method, stored.path, stored.params) != (method, path, params):
                    return _error(
                        StripeError(
                            400,
                            "Keys for idempotent requests can only be used with the same "
                            f"parameters they were first used with. Try using a key other than "
                            f"'{key}' if you meant to execute a different request.",
                            type="idempotency_error",
                        )
                    )
                return Response(
                    stored.body,
                    stored.status,
                    media_type=stored.content_type,
                    headers={"Idempotent-Replayed": "true", "Idempotency-Key": slot[1]},
                )
        found = route(method, path, account, self.state)
        if found is None:
            response = await self.forward(request, body)
            if method == "POST" and path == "/v1/refunds" and response.status_code == 200:
                refund = json.loads(bytes(response.body))
                if self.state.pending_refunds > 0:
                    self.state.pending_refunds -= 1
                    refund["status"] = "pending"
                    response = Response(json.dumps(refund), 200, media_type="application/json")
                else:
                    await self.refunded(request, refund, key)
        else:
            handler, match = found
            call = Call(
                state=self.state,
                method=method,
                path=path,
                params=params,
                account=account,
                idempotency_key=key,
                authorization=request.headers.get("authorization", ""),
                base_url=str(request.base_url).rstrip("/"),
                match=match,
            )
            try:
                response = Response(json.dumps(handler(call)), 200, media_type="application/json")
            except StripeError as err:
                response = _error(err)
        if slot is not None and response.status_code < 500 and response.status_code != 429:
            self.state.idempotent[slot] = Stored(
                method,
                path,
                params,
                response.status_code,
                bytes(response.body),
                response.media_type or "application/json",
            )
        if key is not None:
            response.headers["Idempotency-Key"] = key
        return response

    async def refunded(self, request: Request, refund: dict[str, Any], key: str | None) -> None:
        """Stripe sends ``charge.refunded`` for a refund; localstripe does not, so the
        double does, with localstripe's charge as it stands after the refund."""
        auth = {"Authorization": request.headers.get("authorization", "")}
        charge = await self.http.get(
            f"{self.state.localstripe}/v1/charges/{refund['charge']}", headers=auth
        )
        charge.raise_for_status()
        self.state.emitter.emit(
            "charge.refunded", charge.json(), request={"id": None, "idempotency_key": key}
        )

    async def forward(self, request: Request, body: bytes) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        answer = await self.http.request(
            request.method,
            self.state.localstripe + request.url.path,
            params=request.url.query or None,
            content=body,
            headers=headers,
        )
        return Response(
            answer.content,
            answer.status_code,
            media_type=answer.headers.get("content-type", "application/json"),
        )


def _error(err: StripeError) -> Response:
    return Response(json.dumps(err.body), err.status, media_type="application/json")


class Double:
    """The outer layer: logs every ``/v1`` request and its answer, and plays faults
    (a status with Stripe's error body, or a connection closed without an answer)."""

    def __init__(self, state: State, inner: Starlette) -> None:
        self.state = state
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1"):
            await self.inner(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        entry: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "idempotency_key": headers.get("idempotency-key"),
            "stripe_account": headers.get("stripe-account"),
            "traceparent": headers.get("traceparent"),
            "status": None,
        }
        self.state.requests.append(entry)
        fault = self.state.take_fault(scope["path"])
        if fault is not None and fault.drop:
            await _drop(send)
            return
        if fault is not None and fault.status is not None:
            entry["status"] = fault.status
            body = _fault_body(fault.status)
            await Response(body, fault.status, media_type="application/json")(scope, receive, send)
            return

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        await self.inner(scope, receive, noting)


async def _drop(send: Send) -> None:
    """Close the connection without answering (uvicorn's protocol owns the transport)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("dropping a connection needs uvicorn's send")
    transport.close()
    await asyncio.sleep(0.05)


def build_app(localstripe: str) -> tuple[Double, State]:
    state = State(localstripe=localstripe.rstrip("/"))
    http = httpx.AsyncClient(timeout=30)
    api = Api(state, http)
    routes = [
        *control.routes(state, http),
        Route("/v1/{rest:path}", api, methods=["GET", "POST", "DELETE"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with http:
            yield

    return Double(state, Starlette(routes=routes, lifespan=lifespan)), state

"""``PaymentGate``: the pure ASGI middleware a seller puts in front of any app.

Written as a plain ASGI callable (no ``BaseHTTPMiddleware``): it streams nothing through
a task group, buffers no response, and works under any ASGI framework or none.  Per
request it does the least it can: a ``lifespan`` scope or an unpriced route goes straight
to the app; a priced route (or a WebSocket handshake, a ``GET`` of its path) is decided by
the :class:`~svc_asgi.GateCore` before the app runs, from the core's memo of paid
decisions when it presents a confirmed receipt (one dictionary lookup); an open-rail
payment is only claimed before the app runs and settled once its answer succeeded
(:mod:`svc_asgi._held`); a ``POST`` to the MCP path, when tools are priced, has its
JSON-RPC body read (bounded) to find a priced ``tools/call``, then handed on unchanged.
docs/gate.md tells the whole story.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from functools import partial
from typing import Any

import anyio

import svc
from svc import Environment

from . import _mcp as mcp
from ._after_body import serve_held
from ._asgi import (
    ASGIApp,
    BodyTooLarge,
    ClientDisconnected,
    Message,
    Receive,
    Scope,
    Send,
    add_paid_headers,
    credential_headers,
    header_map,
    read_body,
    replay,
    request_id_of,
    request_url,
    route_path,
    send_response,
)
from ._backend import GateBackend, ServiceBackend
from ._core import FailedOpen, GateCore, OnServiceError, Outcome, Paid, Refusal
from ._mcp import McpChallenge
from ._payment import GATE_ERROR_STATE_KEY, STATE_KEY
from ._prices import PriceTable, Route
from ._rails import PaymentRail, RailRequest
from ._service_rails import ServiceRails
from ._usage import Usage, ignoring_usage
from ._websocket import (
    DENIAL_EXTENSION,
    POLICY_VIOLATION,
    TRY_AGAIN_LATER,
    add_accept_headers,
    close_reason,
)

__all__ = ["PaymentGate"]

#: MCP tool-call bodies are buffered up to this by default; MCP's own server accepts
#: 4 MiB, but a tool call's arguments rarely need more than a fraction of one.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: A paid answer is for the payer: shared caches must not hand it to the next caller.
_PRIVATE = ((b"cache-control", b"private"),)


class PaymentGate:
    """Sell routes and MCP tools of an ASGI app for the service's resources.

    ::

        app = PaymentGate(
            app,
            service_url="https://svc.example",
            seller_key="svc_sk_live_…",
            prices={"GET /v1/report": "res_…", "mcp:search": "res_…"},
        )

    ``prices`` maps ``"METHOD /path"``, ``"/path"`` (any method; ``{param}`` segments) or
    ``"mcp:tool"`` to resource ids (see :class:`PriceTable` for the matching rules), or
    to a :class:`Route` saying when an open-rail payment is settled: a metered resource,
    or ``Route("res_…", settle="after_body")``, is settled once the whole body is out,
    for the units the app reports (``scope["extensions"]["svc.usage"]`` or an
    ``X-Svc-Usage`` header; docs/gate.md, "Metered and streaming routes").
    ``service_url``, ``seller_key`` and ``environment`` default to ``SVC_BASE_URL``,
    ``SVC_SELLER_KEY`` and ``SVC_ENVIRONMENT``; pass ``client`` (an
    :class:`svc.AsyncClient` with a seller key) to share or instrument one, or
    ``backend`` to answer from elsewhere entirely.

    ``rails`` are the open payment rails the gate speaks (see :class:`PaymentRail`).  By
    default a gate talking to the service speaks x402 and MPP through it
    (:class:`ServiceRails`): once the seller has enabled payments, every 402 carries
    both challenges and a paid retry is settled by the service, with no change here.
    ``rails=()`` turns that off (receipts only); a gate built on ``backend`` has no
    rails unless given some.  ``public_url`` is the origin clients reach the app at
    (``https://shop.example``), when a proxy in front changes the scheme or host that
    the challenges must name; by default the request's own scheme and ``Host``.

    ``mcp_path`` is the path (or paths) of the app's streamable-HTTP MCP endpoint, where
    ``tools/call`` is gated by tool name.  ``on_service_error`` is ``"fail_closed"``
    (503 when the service cannot be reached; the default) or ``"fail_open"``.
    ``cache_ttl`` is how long a confirmed receipt and a resource's price are reused;
    ``max_body_bytes`` bounds the MCP bodies the gate buffers.

    A priced tool is paid like a route, in MCP's terms: by ``_meta["svc/receipt"]``, or
    by the official MCP payment clients of x402 (``_meta["x402/payment"]``) and MPP
    (``_meta["org.paymentauth/credential"]``), whose credential is claimed, the tool run,
    and the claim settled only when the result's ``isError`` is false.  An unpaid call is
    answered as ``mcp_challenge`` says: ``"tool_result"`` (the default; a tool error that
    x402's client pays, its ``structuredContent`` the x402 challenge) or
    ``"jsonrpc_error"`` (the ``-32042`` error that pympp's client pays); see docs/mcp.md.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        prices: Mapping[str, str | Route],
        service_url: str | None = None,
        seller_key: str | None = None,
        environment: Environment | None = None,
        mcp_path: str | Sequence[str] = "/mcp",
        on_service_error: OnServiceError = "fail_closed",
        cache_ttl: float = 60.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout: float = 10.0,
        client: svc.AsyncClient | None = None,
        backend: GateBackend | None = None,
        rails: Sequence[PaymentRail] | None = None,
        public_url: str | None = None,
        mcp_challenge: McpChallenge = "tool_result",
    ) -> None:
        self.app = app
        if mcp_challenge not in ("tool_result", "jsonrpc_error"):
            raise ValueError('mcp_challenge must be "tool_result" or "jsonrpc_error"')
        self.mcp_challenge: McpChallenge = mcp_challenge
        self.prices = PriceTable(prices)
        self._priced_routes = self.prices.exact_routes
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be a positive number of bytes")
        self.max_body_bytes = max_body_bytes
        paths = [mcp_path] if isinstance(mcp_path, str) else list(mcp_path)
        self.mcp_paths = frozenset(p.rstrip("/") or "/" for p in paths)
        self.public_url = public_url.rstrip("/") if public_url else None
        self._owned_client: svc.AsyncClient | None = None
        if backend is None:
            if client is None:
                if not (seller_key or os.environ.get("SVC_SELLER_KEY")):
                    raise svc.ConfigurationError(
                        "PaymentGate needs the seller key (seller_key= or SVC_SELLER_KEY): "
                        "receipts are verified as the seller"
                    )
                client = svc.AsyncClient(
                    base_url=service_url,
                    seller_key=seller_key,
                    environment=environment,
                    timeout=timeout,
                    max_retries=1,
                )
                self._owned_client = client
            backend = ServiceBackend(client)
            if rails is None:
                rails = [ServiceRails(client)]
        self.core = GateCore(
            backend, cache_ttl=cache_ttl, on_service_error=on_service_error, rails=rails or ()
        )

        self._remembered = self.core.remembered_key

    async def aclose(self) -> None:
        """Close the HTTP client the gate created (not one passed in).  Done for you at
        lifespan shutdown when the server runs the lifespan protocol."""
        if self._owned_client is not None:
            await self._owned_client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "websocket":
                resource_id = self.prices.match_route("GET", route_path(scope))
                if resource_id is not None:
                    await self._gate_websocket(scope, receive, send, resource_id)
                    return
            elif kind == "lifespan" and self._owned_client is not None:
                send = self._closing_at_shutdown(send)
            await self.app(scope, receive, send)
            return
        # A priced route spelled exactly (no root_path to strip) is one lookup; anything else
        # is matched by the price table's full rules.
        path = route_path(scope) if scope.get("root_path") else scope["path"]
        method = scope["method"]
        resource_id = self._priced_routes.get((method, path)) or self.prices.match_route(
            method, path
        )
        if resource_id is not None:
            # The hot path, inline: a receipt this gate has confirmed (and no open-rail
            # credential to redeem instead) is one lookup in the core's memo of paid
            # decisions; no coroutine of its own, nothing built but the ``send`` that adds
            # the receipt headers.  Anything else is decided the long way.
            found, rail_credential = credential_headers(scope)
            paid = None
            if found is not None and not (rail_credential and self.core.rails):
                paid = self._remembered((resource_id, found[0], found[1]))
            if paid is None or paid.held is not None:
                await self._gate_route(scope, receive, send, resource_id)
                return
            state = scope.get("state")
            if state is None:
                state = scope["state"] = {}
            state[STATE_KEY] = paid.payment
            await self.app(
                scope,
                receive,
                add_paid_headers(send, paid.raw_headers, paid.raw_names, paid.raw_watched),
            )
        elif self.prices.tools and method == "POST" and (path.rstrip("/") or "/") in self.mcp_paths:
            await self._gate_mcp(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _after_body(self, resource_id: str) -> bool:
        """The resource is settled after the body (its cached offer is metered, or its
        route says so): the app may report usage, whoever paid."""
        offer = self.core.cached_offer(resource_id)
        metered = offer is not None and offer.metered
        return metered or self.prices.route(resource_id).settle == "after_body"

    def _closing_at_shutdown(self, send: Send) -> Send:
        async def send_then_close(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.aclose()
            await send(message)

        return send_then_close

    # --- HTTP routes --------------------------------------------------------------------------

    async def _gate_route(
        self, scope: Scope, receive: Receive, send: Send, resource_id: str
    ) -> None:
        outcome = await self._decide(scope, resource_id, scope["method"])
        if type(outcome) is not Refusal:
            await self._pass(scope, receive, send, outcome)
            return
        status, extra, body = outcome.render(request_id_of(scope))
        await send_response(send, status, body, headers=extra)

    async def _decide(self, scope: Scope, resource_id: str, method: str) -> Outcome:
        """Paid, refused or failed open, from the request's headers alone: the one decision
        for an HTTP request and a WebSocket handshake (a ``GET``) alike."""
        core = self.core
        found, carries_rail = credential_headers(scope)
        rail_credential = carries_rail and bool(core.rails)  # without rails, receipts only
        if found is not None and not rail_credential:
            paid = core.remembered(resource_id, *found)
            if paid is not None:  # the hot path: a receipt this gate has confirmed
                return paid
        request = partial(_rail_request, scope, method, self.public_url) if core.rails else None
        if rail_credential:
            return await core.check(resource_id, header_map(scope), request=request)
        if found is None:
            return await core.check(resource_id, {}, request=request)
        route = self.prices.routes.get(resource_id)
        remember = route is None or route.settle != "after_body"  # single use otherwise
        return await core.check_header(resource_id, *found, request=request, remember=remember)

    async def _pass(self, scope: Scope, receive: Receive, send: Send, outcome: Outcome) -> None:
        state: MutableMapping[str, Any] = scope.setdefault("state", {})
        if type(outcome) is Paid and outcome.held is not None:
            state[STATE_KEY] = outcome.payment
            await self._serve_held(scope, receive, send, outcome)
            return
        if type(outcome) is Paid:
            state[STATE_KEY] = outcome.payment
            if scope["type"] == "websocket":  # the receipt headers go on the handshake answer
                send = add_accept_headers(send, outcome.raw_headers, outcome.raw_names)
            else:
                if self._after_body(outcome.payment.resource_id):
                    send = ignoring_usage(scope, send)
                send = add_paid_headers(
                    send, outcome.raw_headers, outcome.raw_names, outcome.raw_watched
                )
        elif type(outcome) is FailedOpen:
            state[GATE_ERROR_STATE_KEY] = outcome.reason
            if scope["type"] == "http":  # metered or not, unknown now: the app may report
                send = ignoring_usage(scope, send)
        else:  # a Refusal never reaches the app
            raise TypeError(f"a {type(outcome).__name__} cannot pass the gate")
        await self.app(scope, receive, send)

    async def _serve_held(self, scope: Scope, receive: Receive, send: Send, paid: Paid) -> None:
        held = paid.held
        route = self.prices.route(held.offer.resource_id) if held is not None else None
        await serve_held(self.core, paid, self.app, scope, receive, send, route=route)

    # --- WebSocket -----------------------------------------------------------------------------

    async def _gate_websocket(
        self, scope: Scope, receive: Receive, send: Send, resource_id: str
    ) -> None:
        """A handshake to a priced path: paid, it reaches the app (which accepts it, with
        the receipt headers added to its ``websocket.accept``); unpaid, it is refused
        before any ``websocket.accept`` and the app never runs."""
        outcome = await self._decide(scope, resource_id, "GET")
        if type(outcome) is not Refusal:
            await self._pass(scope, receive, send, outcome)
            return
        if (await receive())["type"] != "websocket.connect":
            return  # the client left before its handshake could be answered
        status, extra, body = outcome.render(request_id_of(scope))
        if DENIAL_EXTENSION in (scope.get("extensions") or {}):
            await send_response(send, status, body, headers=extra, protocol="websocket.http")
        else:  # no way to send a status: close the handshake, with the why as its reason
            code = TRY_AGAIN_LATER if status == 503 else POLICY_VIOLATION
            await send({"type": "websocket.close", "code": code, "reason": close_reason(outcome)})

    # --- MCP ----------------------------------------------------------------------------------

    async def _gate_mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = header_map(scope)
        try:
            body = await read_body(receive, self.max_body_bytes)
        except ClientDisconnected:
            return
        except BodyTooLarge:
            error = mcp.error_message(
                None,
                mcp.INVALID_REQUEST,
                f"The request body is larger than {self.max_body_bytes} bytes.",
            )
            await self._send_jsonrpc(send, scope, headers, 413, error)
            return
        try:
            message = mcp.parse_body(body)
        except ValueError as exc:
            error = mcp.error_message(None, mcp.PARSE_ERROR, f"Parse error: {exc}")
            await self._send_jsonrpc(send, scope, headers, 400, error)
            return
        receive = replay(body, receive)

        if isinstance(message, list):
            refused = mcp.priced_calls_in_batch(message, self.prices)
            if not refused:
                await self.app(scope, receive, send)
                return
            errors = [
                mcp.error_message(
                    call.id,
                    mcp.INVALID_REQUEST,
                    "A paid tool call cannot be sent in a batch; send tools/call on its own.",
                )
                for call in refused
                if not call.is_notification
            ]
            await self._send_jsonrpc(send, scope, headers, 400, errors)
            return

        call = mcp.find_tool_call(message)
        if call is None:
            await self.app(scope, receive, send)
            return
        if not isinstance(call.name, str):
            error = mcp.error_message(
                call.id, mcp.INVALID_PARAMS, "tools/call needs params.name, a string."
            )
            await self._send_jsonrpc(send, scope, headers, 400, error)
            return
        resource_id = self.prices.match_tool(call.name)
        if resource_id is None:
            await self.app(scope, receive, send)
            return
        await self._gate_tool_call(scope, receive, send, headers, call, resource_id)

    async def _gate_tool_call(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        call: mcp.ToolCall,
        resource_id: str,
    ) -> None:
        """A priced ``tools/call``: paid by receipt or open-rail credential, or refused."""
        try:
            credentials = mcp.rail_credential_headers(call)
        except ValueError as exc:
            error = mcp.error_message(
                call.id, mcp.INVALID_PARAMS, f"Malformed payment credential: {exc}."
            )
            await self._send_jsonrpc(send, scope, headers, 400, error)
            return
        outcome = await self.core.check(
            resource_id,
            {**headers, **credentials} if credentials else headers,
            meta_receipt=call.meta_receipt,
            request=partial(_rail_request, scope, "POST", self.public_url),
        )
        if type(outcome) is Paid and outcome.held is not None:
            await self._serve_held_tool(scope, receive, send, outcome, call, headers)
        elif isinstance(outcome, Paid | FailedOpen):
            await self._pass(scope, receive, send, outcome)
        else:
            await self._refuse_tool_call(send, scope, headers, call, outcome)

    async def _serve_held_tool(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        paid: Paid,
        call: mcp.ToolCall,
        headers: Mapping[str, str],
    ) -> None:
        """Run a tool whose open-rail payment is claimed: its answer is buffered whole,
        the claim settled only when the result's ``isError`` is false (the receipt then
        added to the result's ``_meta``) and released otherwise, the answer unchanged."""
        state: MutableMapping[str, Any] = scope.setdefault("state", {})
        state[STATE_KEY] = paid.payment
        start: Message | None = None
        chunks: list[bytes] = []
        usage = Usage()  # a metered tool reports its units during the call
        usage.install(scope)

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        try:
            await self.app(scope, receive, capture)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.core.release(paid, status=500, reason="answer_failed")
            raise
        if start is None:
            await self.core.release(paid, status=None, reason="answer_missing")
            return
        answer = mcp.ToolAnswer(
            status=int(start.get("status", 200)),
            headers=usage.take_header(start.get("headers", ())),
            body=b"".join(chunks),
        )
        if not mcp.tool_succeeded(answer.response(call.id)):
            status = answer.status if answer.status >= 400 else None
            await self.core.release(paid, status=status, reason="answer_failed")
            await send(start)
            await send({"type": "http.response.body", "body": answer.body})
            return
        metered = paid.held is not None and paid.held.offer.metered
        settled = await self.core.settle(paid, units=usage.units if metered else None)
        if type(settled) is not Paid:
            if not isinstance(settled, Refusal):  # pragma: no cover - Paid or Refusal only
                raise TypeError(f"settle answered a {type(settled).__name__}")
            await self._refuse_tool_call(send, scope, headers, call, settled)
            return
        body = answer.with_meta(call.id, mcp.receipt_meta(settled.raw_headers, call))
        dropped = settled.raw_names | {b"content-length"}
        kept = [(k, v) for k, v in answer.headers if k.lower() not in dropped]
        if not any(k.lower() == b"cache-control" for k, _ in kept):
            kept += _PRIVATE
        kept += [*settled.raw_headers, (b"content-length", str(len(body)).encode())]
        await send({**start, "headers": kept})
        await send({"type": "http.response.body", "body": body})

    async def _refuse_tool_call(
        self,
        send: Send,
        scope: Scope,
        headers: Mapping[str, str],
        call: mcp.ToolCall,
        outcome: Refusal,
    ) -> None:
        """A refused tools/call answered as the MCP client can read it: a tool error the
        model sees for a payment it can make, a JSON-RPC error for a service failure."""
        request_id = request_id_of(scope)
        if call.is_notification:  # nobody to answer in JSON-RPC: refuse at the HTTP level
            status, extra, body = outcome.render(request_id)
            await send_response(send, status, body, headers=extra)
        elif outcome.status in (402, 409):
            answer = mcp.rail_tool_error(
                call,
                outcome,
                request_id,
                modern=mcp.is_modern(headers),
                jsonrpc_error=self.mcp_challenge == "jsonrpc_error",
            )
            await self._send_jsonrpc(send, scope, headers, 200, answer, request_id)
        else:
            error = mcp.error_message(
                call.id, mcp.PAYMENT_SERVICE_ERROR, outcome.message, outcome.body(request_id)
            )
            await self._send_jsonrpc(send, scope, headers, outcome.status, error, request_id)

    async def _send_jsonrpc(
        self,
        send: Send,
        scope: Scope,
        headers: Mapping[str, str],
        status: int,
        payload: object,
        request_id: str | None = None,
    ) -> None:
        content_type, body = mcp.render(payload, headers)
        extra = [
            (b"cache-control", b"no-store"),
            (b"x-request-id", (request_id or request_id_of(scope)).encode("latin-1")),
        ]
        session = headers.get("mcp-session-id")
        if session is not None:
            extra.append((b"mcp-session-id", session.encode("latin-1")))
        await send_response(send, status, body, content_type=content_type, headers=extra)


def _rail_request(scope: Scope, method: str, origin: str | None) -> RailRequest:
    """The request as the rails bind a challenge to it: built only when a rail needs it."""
    return RailRequest(method, request_url(scope, origin))

"""Hosted gates: every resource's ``gate_url`` (``/g/{short_id}``, any method; what each
request gets: docs/gate.md, "Hosted gates").

A hosted gate is the service selling a resource on the seller's behalf, decided by the
same :class:`svc_asgi.GateCore` a seller's own app runs, answered from the database
(:class:`~reference_server.routes.gates.backend.DatabaseGateBackend`).  It forwards a paid
request to the resource's ``upstream_url`` through :mod:`reference_server.outbound`, the
SSRF-safe client webhooks use, so an ``upstream_url`` can never reach the service's own
network in production.  It takes any method and any body (it forwards bytes, not JSON)
and awaits the network: a :class:`~reference_server.web.endpoint.Flow` with a raw body.
``/demo/echo`` shares the helpers below.
"""

from __future__ import annotations

import re
from contextlib import AsyncExitStack
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from svc import Resource
from svc.money import MAX_UNITS, format_amount
from svc.wire import unstructure
from svc_asgi import GateCore, Paid, Payment, PaymentRail, RailRequest, Refusal

from ... import outbound
from ...context import ServerContext
from ...domain import open_rails
from ...domain.resources import resource_model
from ...invariant import InvariantError
from ...web.endpoint import RAW_BODY, Call, Contract, Endpoint, Flow
from ...web.errors import ApiError
from ...web.json_body import read_body
from ...web.responses import error_response, json_response
from .backend import DatabaseGateBackend, DatabaseRails, find_gate_by_short_id
from .relay import RelayedAnswer, is_event_stream

__all__ = [
    "ENDPOINTS",
    "GATE_REFUSALS",
    "UPSTREAM_MAX_RESPONSE_BYTES",
    "paid_headers",
    "receipt_json",
    "refusal_response",
]

#: The most of an upstream's answer a gate relays; a longer one is a 502, never cut
#: silently (a truncated JSON document is worse than an error).
UPSTREAM_MAX_RESPONSE_BYTES = 1024 * 1024
#: The most a streamed answer (``text/event-stream``) relays in all: a stream is not
#: held, so its bound is about runaway upstreams, not memory.
UPSTREAM_MAX_STREAM_BYTES = 64 * 1024 * 1024
#: Every method a gate serves (HEAD is GET's); the discovery documents list GET and POST.
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_LISTED = {"GET", "POST"}
_SHORT_ID = re.compile(r"^[A-Za-z0-9]{4,16}$")
#: What a gate's core answers instead of the resource (:class:`svc_asgi.Refusal` codes).
GATE_REFUSALS = (
    "payment_required",
    "resource_inactive",
    "payment_service_unavailable",
    "gate_misconfigured",
)

#: Connection-level headers (RFC 9110 7.6.1): about this hop, never forwarded.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers the upstream must not see: credentials for the service (receipts are
#: bearer tokens, wallet keys spend money), the agent's cookies for the service's domain,
#: and what the outbound client sets itself.
_NOT_FORWARDED = _HOP_BY_HOP | {
    "host",
    "content-length",
    "expect",
    "accept-encoding",
    "authorization",
    "cookie",
    "x-svc-vw-key",
    "x-svc-receipt",
    "payment-receipt",
    "payment-response",
    "payment-signature",
    "x-payment",
    "x-request-id",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
}
#: Response headers not relayed: framing (recomputed), cookies (they would land on the
#: service's domain), and what this server sets itself.
_NOT_RETURNED = _HOP_BY_HOP | {"content-length", "set-cookie", "x-request-id", "date", "server"}
#: Resource fields a public gate shows (not the seller id, nor where it forwards to).
_PUBLIC_RESOURCE_FIELDS = (
    "id",
    "short_id",
    "kind",
    "path_or_tool",
    "amount",
    "description",
    "metadata",
    "method",
    "body_hint",
    "gate_url",
    "pay_url",
    "environment",
)


# --- helpers shared with /demo/echo ---------------------------------------------------------


def refusal_response(refusal: Refusal, request_id: str) -> Response:
    status, headers, body = refusal.render(request_id)
    return Response(
        body,
        status_code=status,
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers},
        media_type="application/json",
    )


def paid_headers(outcome: Paid) -> dict[str, str]:
    """``X-Svc-Receipt`` (and any rail's receipt headers) for a paid answer."""
    return dict(outcome.headers)


def receipt_json(payment: Payment) -> dict[str, Any]:
    v = payment.verification
    return {
        "receipt_id": payment.receipt_id,
        "resource_id": payment.resource_id,
        "amount": None if payment.amount is None else format_amount(payment.amount),
        "rail": payment.rail,
        "environment": payment.environment,
        "sku_kind": payment.sku_kind,
        "credits": _number(payment.credits),
        "credit_unit": payment.credit_unit,
        "created_at": unstructure(v.created_at) if v.created_at is not None else None,
    }


def _number(value: Decimal | None) -> int | str | None:
    """Credits as the seller wrote them: a whole number stays a number."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else str(value)


# --- the hosted gate ------------------------------------------------------------------------


async def hosted_gate(call: Call) -> Response:
    """Any method on ``/g/{short_id}``: 402 until paid, then the upstream (or the receipt)."""
    ctx, request, request_id = call.ctx, call.request, call.request_id
    short_id = call.params["short_id"]
    if not _SHORT_ID.fullmatch(short_id):
        raise ApiError("not_found", "No such gate.")
    base = call.public_url
    gate = await anyio.to_thread.run_sync(
        find_gate_by_short_id, ctx, short_id, urlsplit(base).netloc
    )
    if gate is None:
        raise ApiError("not_found", "No such gate.")
    resource = resource_model(gate.resource, base)
    _check_method(resource, request.method)
    rails: list[PaymentRail] = []
    if open_rails.offered(ctx, gate.seller) is not None:
        rails.append(DatabaseRails(ctx, gate, request_id))
    # No cache: the database is the source of truth and is as near as a cache would be.
    backend = DatabaseGateBackend(ctx, base, known=[resource], request_id=request_id)
    core = GateCore(backend, cache_ttl=0, rails=rails)
    # The URL the client paid for, as it addressed it: both protocols bind the challenge
    # to it, so the challenge and the paid retry must name it alike.
    query = request.url.query
    url = base + request.url.path + (f"?{query}" if query else "")
    outcome = await core.check(
        resource.id, request.headers, request=RailRequest(request.method, url)
    )
    if isinstance(outcome, Refusal):
        return refusal_response(outcome, request_id)
    if not isinstance(outcome, Paid):
        raise InvariantError("hosted gates fail closed")
    try:
        if resource.upstream_url:
            return await _forward(request, ctx, resource, core, outcome, request_id)
        response = _receipt_answer(resource, outcome, request_id)
    except BaseException:
        if outcome.held is not None:
            with anyio.CancelScope(shield=True):  # also when the client went away
                await core.release(outcome, status=500, reason="answer_failed")
        raise
    return await _settled(core, outcome, response, request_id)


def _receipt_answer(resource: Resource, outcome: Paid, request_id: str) -> Response:
    """A resource without an upstream answers its receipt."""
    return json_response(
        {
            "ok": True,
            "paid": True,
            "receipt": receipt_json(outcome.payment),
            "resource": _public(resource),
            "request_id": request_id,
        },
        headers={**paid_headers(outcome), "Cache-Control": "no-store"},
    )


def _check_method(resource: Resource, method: str) -> None:
    """A resource sold for one method (``method`` set) answers any other with 405 and
    ``Allow``, before anything is asked or paid: a wrong method never costs the caller."""
    sold = resource.method
    if sold is None or method == sold or (method == "HEAD" and sold == "GET"):
        return
    raise ApiError(
        "method_not_allowed",
        f"This gate sells {sold} requests only; send {sold}.",
        headers={"Allow": "GET, HEAD" if sold == "GET" else sold},
    )


async def _settled(
    core: GateCore, outcome: Paid, response: Response, request_id: str, units: int | None = None
) -> Response:
    """A claimed payment's answer: settled below 400 (with the payment headers; ``units``:
    what a metered answer used), else the claim released and the answer returned as it
    is; withheld when settling fails.  A payment made up front: the answer as it is."""
    if outcome.held is None:
        return response
    if response.status_code >= 400:
        await core.release(outcome, status=response.status_code, reason="answer_failed")
        return response
    settled = await core.settle(outcome, units=units)
    if isinstance(settled, Refusal):
        return refusal_response(settled, request_id)
    for name, value in paid_headers(settled).items():
        response.headers[name] = value
    return response


def _public(resource: Resource) -> dict[str, Any]:
    fields = unstructure(resource)
    return {name: fields[name] for name in _PUBLIC_RESOURCE_FIELDS}


# --- forwarding to the upstream -------------------------------------------------------------


def _forwarded_headers(request: Request) -> list[tuple[str, str]]:
    named_by_connection = {
        token.strip().lower()
        for value in request.headers.getlist("connection")
        for token in value.split(",")
    }
    return [
        (name, value)
        for name, value in request.headers.items()
        if name not in _NOT_FORWARDED and name not in named_by_connection
    ]


def _upstream_url(upstream: str, query: str) -> str:
    """The upstream URL with the request's query string appended to its own."""
    if not query:
        return upstream
    base, _, fragment = upstream.partition("#")
    joined = f"{base}{'&' if '?' in base else '?'}{query}"
    return f"{joined}#{fragment}" if fragment else joined


def _gate_error(status: int, code: str, message: str, request_id: str) -> Response:
    """Upstream failures, in the service's envelope (codes from ``web.errors.CODES``)."""
    error = ApiError(code, message, headers={"Cache-Control": "no-store"})
    if error.status != status:
        raise InvariantError(f"{code} is documented as {error.status}")
    return error_response(error, request_id)


async def _forward(
    request: Request,
    ctx: ServerContext,
    resource: Resource,
    core: GateCore,
    outcome: Paid,
    request_id: str,
) -> Response:
    """The upstream's answer: a ``text/event-stream`` relayed as it arrives and settled
    after its last chunk (:class:`~.relay.RelayedAnswer`); any other read whole (at most
    :data:`UPSTREAM_MAX_RESPONSE_BYTES`) and settled before it is answered, for the units
    its ``X-Svc-Usage`` reports when metered (none reported: the maximum)."""
    if resource.upstream_url is None:
        raise InvariantError("expected resource.upstream_url is not None")
    settings = ctx.settings
    body = await read_body(request, settings.max_body_bytes)
    headers = _forwarded_headers(request)
    headers += [
        ("X-Svc-Verified-Receipt", outcome.payment.receipt_id),
        ("X-Svc-Resource-Id", resource.id),
        ("X-Request-Id", request_id),
    ]
    policy = outbound.OutboundPolicy.from_settings(
        settings,
        resolver=settings.outbound_resolver,
        max_response_bytes=UPSTREAM_MAX_STREAM_BYTES,
        max_request_bytes=max(settings.max_body_bytes, 1),
        user_agent="svc-hosted-gate",
    )
    url = _upstream_url(resource.upstream_url, request.url.query)

    async def failed(code: str, message: str) -> Response:
        return await _settled(
            core, outcome, _gate_error(502, code, message, request_id), request_id
        )

    try:
        fetched = await _fetch(request.method, url, headers, body, policy, core, outcome)
    except outbound.OutboundRefused as exc:
        return await failed("upstream_refused", f"The resource's upstream is not allowed: {exc}.")
    except outbound.OutboundFailed as exc:
        return await failed("upstream_unavailable", f"The resource's upstream failed: {exc}.")
    except TimeoutError:
        return await failed(
            "upstream_unavailable",
            f"The resource's upstream did not answer within {policy.total_timeout:g} s.",
        )
    if isinstance(fetched, RelayedAnswer):
        return fetched
    status, relayed, answer, truncated = fetched
    if truncated:
        return await failed(
            "upstream_too_large",
            f"The upstream's answer is larger than {UPSTREAM_MAX_RESPONSE_BYTES} bytes.",
        )
    response = _whole_answer(status, relayed, answer, outcome)
    return await _settled(core, outcome, response, request_id, _reported_units(relayed))


def _whole_answer(
    status: int, relayed: list[tuple[str, str]], body: bytes, outcome: Paid
) -> Response:
    """The upstream's answer as the payer gets it: its headers less ``X-Svc-Usage`` (the
    seller's business), with the payment's, private to the payer."""
    response = Response(body, status_code=status)
    for name, value in relayed:
        if name.lower() != "x-svc-usage":
            response.headers.append(name, value)
    for name, value in paid_headers(outcome).items():
        response.headers[name] = value
    response.headers.setdefault("cache-control", "private")
    return response


async def _fetch(
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    policy: outbound.OutboundPolicy,
    core: GateCore,
    outcome: Paid,
) -> RelayedAnswer | tuple[int, list[tuple[str, str]], bytes, bool]:
    """The upstream's answer: a stream to relay, or its status, relayed headers, body
    (at most :data:`UPSTREAM_MAX_RESPONSE_BYTES`, on the policy's total deadline) and
    whether there was more."""
    opened = AsyncExitStack()
    try:
        upstream = await opened.enter_async_context(
            outbound.stream(method, url, headers=headers, content=body or None, policy=policy)
        )
        relayed = [
            (name, value)
            for name, value in upstream.headers.multi_items()
            if name.lower() not in _NOT_RETURNED
        ]
        if upstream.status < 400 and is_event_stream(upstream.headers):
            streamed = RelayedAnswer(opened, upstream, relayed, core, outcome)
            opened = AsyncExitStack()  # the relay closes the connection when it ends
            return streamed
        with anyio.fail_after(policy.total_timeout):  # a whole answer, on one deadline
            answer, truncated = await _read_whole(upstream, UPSTREAM_MAX_RESPONSE_BYTES)
        return upstream.status, relayed, answer, truncated
    finally:
        await opened.aclose()


async def _read_whole(upstream: outbound.OutboundStream, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` bytes of the answer, and whether there was more (left unread)."""
    body = bytearray()
    async for chunk in upstream.chunks():
        body += chunk
        if len(body) > cap:
            return bytes(body[:cap]), True
    return bytes(body), False


def _reported_units(headers: list[tuple[str, str]]) -> int | None:
    """The ``X-Svc-Usage`` an upstream reported (a whole number), or ``None``."""
    for name, value in headers:
        text = value.strip()
        if name.lower() == "x-svc-usage" and text.isascii() and text.isdigit():
            return min(int(text), MAX_UNITS)
    return None


# --- registration ---------------------------------------------------------------------------

#: ``/g/{short_id}``, every method (and under ``/api``).
ENDPOINTS = [
    Endpoint(
        method=method,
        path="/g/{short_id}",
        handler=hosted_gate,
        run=Flow(),
        body=RAW_BODY,
        contract=Contract(
            listed=method in _LISTED,
            gate=True,
            errors=(
                *GATE_REFUSALS,
                "method_not_allowed",
                "payload_too_large",
                "bad_request",
                "upstream_refused",
                "upstream_unavailable",
                "upstream_too_large",
            ),
            summary="Hosted gate of a resource (any method): 402 until paid (a receipt in "
            "X-Svc-Receipt, or the x402 / MPP challenge it carries once the seller enabled "
            "payments), then the upstream's answer or the receipt.",
        ),
    )
    for method in _METHODS
]

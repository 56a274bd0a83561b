"""Hosted gates: every resource's ``gate_url`` (``/g/{short_id}``, any method).

A hosted gate is the service selling a resource on the seller's behalf.  It is decided
by the same :class:`svc_asgi.GateCore` a seller's own app runs, answered from the
database (:class:`~reference_server.gate_backend.DatabaseGateBackend`):

* unpaid (no receipt, a malformed one, one for another resource, an unknown one): 402 in
  the service's envelope, ``Cache-Control: no-store``, details naming what to pay, and —
  once the seller has enabled payments — the x402 and MPP challenges
  (:class:`~reference_server.gate_backend.DatabaseRails`), bound to the ``gate_url`` as
  the client addressed it;
* an x402 ``PAYMENT-SIGNATURE`` or MPP ``Authorization: Payment`` credential: settled
  and booked (:mod:`reference_server.domain.open_rails`), then served like a receipt;
* paid, and the resource has an ``upstream_url``: the request (method, query, body,
  end-to-end headers) is forwarded there through :mod:`reference_server.outbound` -- the
  SSRF-safe client webhooks use, so an ``upstream_url`` can never reach the service's own
  network in production -- and the upstream's answer is returned (bounded);
* paid, without an upstream: 200 with the receipt and the resource.

These routes are not :class:`~reference_server.api.endpoint.Endpoint` handlers: a gate
takes any method and any body (it forwards bytes, not JSON) and awaits the network, so it
is a plain async Starlette route that keeps the same rules by hand -- rate limit, the
envelope, ``request_id`` -- with the helpers below, which ``/demo/echo`` shares.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from sqlalchemy.exc import OperationalError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from svc import Resource
from svc._converter import unstructure
from svc._money import format_amount
from svc_asgi import GateCore, Paid, Payment, PaymentRail, RailRequest, Refusal

from .. import outbound
from ..api.endpoint import Call, Endpoint
from ..api.errors import ApiError
from ..api.responses import Reply, error_response, json_response
from ..context import ServerContext
from ..domain import open_rails
from ..domain.errors import DomainError
from ..domain.resources import resource_model
from ..gate_backend import DatabaseGateBackend, DatabaseRails, find_gate_by_short_id
from ..invariant import InvariantError

__all__ = [
    "DOCUMENTED",
    "UPSTREAM_MAX_RESPONSE_BYTES",
    "paid_headers",
    "public_url",
    "rate_limit",
    "receipt_json",
    "refusal_response",
    "routes",
]

#: The most of an upstream's answer a gate relays; a longer one is a 502, never cut
#: silently (a truncated JSON document is worse than an error).
UPSTREAM_MAX_RESPONSE_BYTES = 1024 * 1024
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_SHORT_ID = re.compile(r"^[A-Za-z0-9]{4,16}$")

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
    "gate_url",
    "pay_url",
    "environment",
)


# --- helpers shared with /demo/echo ---------------------------------------------------------


def public_url(request: Request) -> str:
    ctx: ServerContext = request.app.state.ctx
    return (ctx.settings.public_url or str(request.base_url)).rstrip("/")


async def rate_limit(request: Request) -> dict[str, str]:
    """Count the request against the anonymous (per address) limit; 429 past it."""
    ctx: ServerContext = request.app.state.ctx
    client = request.client.host if request.client else None
    identity = ctx.limiter.identity(request.headers, client)
    return await anyio.to_thread.run_sync(
        ctx.limiter.hit, ctx.settings.rate_limit, "rate_limit", identity
    )


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


def _finish(response: Response, limit_headers: dict[str, str]) -> Response:
    for name, value in limit_headers.items():
        response.headers.setdefault(name, value)
    return response


# --- the hosted gate ------------------------------------------------------------------------


async def hosted_gate(request: Request) -> Response:
    """Any method on ``/g/{short_id}``: 402 until paid, then the upstream (or the receipt)."""
    request_id: str = request.state.request_id
    limit_headers: dict[str, str] = {}
    try:
        limit_headers = await rate_limit(request)
        response = await _serve(request, request_id)
    except DomainError as exc:
        response = error_response(exc, request_id)
    return _finish(response, limit_headers)


async def _serve(request: Request, request_id: str) -> Response:
    ctx: ServerContext = request.app.state.ctx
    short_id = request.path_params["short_id"]
    if not _SHORT_ID.fullmatch(short_id):
        raise ApiError("not_found", "No such gate.")
    base = public_url(request)
    try:
        gate = await anyio.to_thread.run_sync(
            find_gate_by_short_id, ctx, short_id, urlsplit(base).netloc
        )
    except OperationalError:
        raise ApiError("not_ready", "The database is not reachable; retry shortly.") from None
    if gate is None:
        raise ApiError("not_found", "No such gate.")
    resource = resource_model(gate.resource, base)
    rails: list[PaymentRail] = []
    if open_rails.offered(ctx, gate.seller) is not None:
        rails.append(DatabaseRails(ctx, gate, request_id))
    # No cache: the database is the source of truth and is as near as a cache would be.
    core = GateCore(DatabaseGateBackend(ctx, base, known=[resource]), cache_ttl=0, rails=rails)
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
    if resource.upstream_url:
        return await _forward(request, ctx, resource, outcome, request_id)
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


def _public(resource: Resource) -> dict[str, Any]:
    fields = unstructure(resource)
    return {name: fields[name] for name in _PUBLIC_RESOURCE_FIELDS}


# --- forwarding to the upstream -------------------------------------------------------------


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError("payload_too_large", f"The body is larger than {limit} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError("payload_too_large", f"The body is larger than {limit} bytes.")
    return bytes(body)


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
    """Upstream failures, in the service's envelope (codes from ``api.errors.CODES``)."""
    error = ApiError(code, message, headers={"Cache-Control": "no-store"})
    if error.status != status:
        raise InvariantError(f"{code} is documented as {error.status}")
    return error_response(error, request_id)


async def _forward(
    request: Request, ctx: ServerContext, resource: Resource, outcome: Paid, request_id: str
) -> Response:
    if resource.upstream_url is None:
        raise InvariantError("expected resource.upstream_url is not None")
    settings = ctx.settings
    body = await _read_body(request, settings.max_body_bytes)
    headers = _forwarded_headers(request)
    headers += [
        ("X-Svc-Verified-Receipt", outcome.payment.receipt_id),
        ("X-Svc-Resource-Id", resource.id),
        ("X-Request-Id", request_id),
    ]
    policy = outbound.OutboundPolicy.from_settings(
        settings,
        resolver=settings.outbound_resolver,
        max_response_bytes=UPSTREAM_MAX_RESPONSE_BYTES,
        max_request_bytes=max(settings.max_body_bytes, 1),
        user_agent="svc-hosted-gate",
    )
    try:
        answer = await outbound.send(
            request.method,
            _upstream_url(resource.upstream_url, request.url.query),
            headers=headers,
            content=body or None,
            policy=policy,
        )
    except outbound.OutboundRefused as exc:
        return _gate_error(
            502, "upstream_refused", f"The resource's upstream is not allowed: {exc}.", request_id
        )
    except outbound.OutboundFailed as exc:
        return _gate_error(
            502, "upstream_unavailable", f"The resource's upstream failed: {exc}.", request_id
        )
    if answer.truncated:
        return _gate_error(
            502,
            "upstream_too_large",
            f"The upstream's answer is larger than {UPSTREAM_MAX_RESPONSE_BYTES} bytes.",
            request_id,
        )
    relayed = [
        (name, value)
        for name, value in answer.headers.multi_items()
        if name.lower() not in _NOT_RETURNED
    ]
    response = Response(answer.body, status_code=answer.status)
    for name, value in relayed:
        response.headers.append(name, value)
    for name, value in paid_headers(outcome).items():
        response.headers[name] = value
    response.headers.setdefault("cache-control", "private")
    return response


# --- registration ---------------------------------------------------------------------------


def routes() -> list[Route]:
    """``/g/{short_id}`` (and under ``/api``), every method."""
    return [
        Route(prefix + "/g/{short_id}", hosted_gate, methods=_METHODS) for prefix in ("", "/api")
    ]


def _documented(method: str, path: str, summary: str) -> Endpoint:
    """An entry for the discovery documents only: the route above serves it."""

    def handler(call: Call) -> Reply:  # pragma: no cover - never routed
        raise AssertionError("served by reference_server.routes.gates")

    handler.__doc__ = summary
    return Endpoint(method=method, path=path, handler=handler)


#: What discovery lists for the gates (served by the raw routes here and in ``access``).
DOCUMENTED = [
    _documented(
        method,
        "/g/{short_id}",
        "Hosted gate of a resource (any method): 402 until paid (a receipt in "
        "X-Svc-Receipt, or the x402 / MPP challenge it carries once the seller enabled "
        "payments), then the upstream's answer or the receipt.",
    )
    for method in ("GET", "POST")
]

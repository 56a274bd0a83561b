"""Open rails for a seller's own gate: ``POST /gates/challenge`` and ``POST /gates/redeem``.

A seller's app runs ``svc_asgi.PaymentGate``, which holds no keys and imports neither x402
nor MPP: for an unpaid request it asks here for the challenge headers, and for a request
carrying a credential it asks here to verify and settle it, with the seller key.  Both
are answered by the same domain code as the hosted gates
(:mod:`reference_server.domain.open_rails`)::

    POST /gates/challenge {"resource_id", "method", "url"}
        -> {"headers": [[name, value], ...]}   (empty until the seller enables payments)
    POST /gates/redeem {"resource_id", "method", "url", "headers": {"PAYMENT-SIGNATURE"
                        | "Authorization": ...}}
        -> {"paid": true, "rail", "verification": {...}, "headers": [...]}
         | {"paid": false, "rail", "reason", "message", "headers": [...]}

``url`` is the absolute URL the client addressed, query included, and ``method`` its
method: both protocols bind the challenge to them, so the challenge and the redemption of
one payment must send the same pair.

These are plain async Starlette routes, not :class:`~reference_server.api.endpoint.Endpoint`
handlers: settling awaits pympp (and, live, a facilitator), which must not hold a database
transaction open.  They keep the pipeline's rules by hand: rate limit per credential, the
JSON body rules, seller-key authentication, the envelope and ``request_id``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from sqlalchemy.exc import OperationalError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from svc import GateChallenge
from svc.receipts import RAIL_CREDENTIAL_HEADERS
from svc_asgi import RailRequest

from ..api.auth import Principal, Role, authenticate
from ..api.endpoint import Call, Endpoint
from ..api.errors import ApiError
from ..api.json_body import read_json_body
from ..api.responses import Reply, error_response, json_response, to_json_body
from ..context import ServerContext
from ..domain import open_rails
from ..domain.errors import DomainError
from ..invariant import InvariantError

__all__ = ["DOCUMENTED", "ROUTES"]

log = logging.getLogger("reference_server")

_METHOD = re.compile(r"^[A-Za-z]{1,16}$")
_MAX_URL = 4096
#: A credential header this long is not a credential (x402's is about 1.5 KB).
_MAX_CREDENTIAL = 16 * 1024

Handler = Callable[[ServerContext, Principal, dict[str, Any], Request, str], Awaitable[Any]]


# --- the two routes -------------------------------------------------------------------------


async def challenge(
    ctx: ServerContext,
    principal: Principal,
    body: dict[str, Any],
    request: Request,
    request_id: str,
) -> GateChallenge:
    resource_id, rail_request, _ = _read(body, with_headers=False)
    gate = await _gate(ctx, principal, resource_id, request)
    return GateChallenge(headers=await open_rails.challenge(ctx, gate, rail_request))


async def redeem(
    ctx: ServerContext,
    principal: Principal,
    body: dict[str, Any],
    request: Request,
    request_id: str,
) -> Any:
    resource_id, rail_request, credentials = _read(body, with_headers=True)
    gate = await _gate(ctx, principal, resource_id, request)
    if not gate.resource.active:
        raise ApiError(
            "resource_inactive",
            f"Resource {resource_id} is deactivated; it cannot be bought or used.",
        )
    try:
        redemption = await open_rails.redeem(
            ctx, gate, rail_request, credentials, request_id=request_id
        )
    except open_rails.SettlementUnavailable as exc:
        raise ApiError(
            "settlement_unavailable",
            f"The payment could not be settled now ({exc}); do not pay again, retry shortly.",
            headers={"Retry-After": "5"},
        ) from None
    return redemption.model()


# --- reading the body -----------------------------------------------------------------------


def _read(body: dict[str, Any], *, with_headers: bool) -> tuple[str, RailRequest, dict[str, str]]:
    """``(resource_id, the request, its credentials)``, or 400 ``invalid_rail_request``
    listing every problem."""
    errors: list[dict[str, str]] = []

    def bad(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    resource_id = body.get("resource_id")
    if not isinstance(resource_id, str) or not 0 < len(resource_id) <= 40:
        bad("resource_id", "must be a resource id")
    method = body.get("method")
    if not isinstance(method, str) or not _METHOD.fullmatch(method):
        bad("method", "must be an HTTP method such as GET")
    url = body.get("url")
    if not isinstance(url, str) or not _absolute(url):
        bad("url", "must be the absolute http(s) URL the client addressed, query included")
    credentials: dict[str, str] = {}
    if with_headers:
        credentials = _credentials(body.get("headers"), bad)
    known = {"resource_id", "method", "url", *(("headers",) if with_headers else ())}
    for name in body:
        if name not in known:
            bad(name, "is not a known field")
    if errors:
        raise ApiError(
            "invalid_rail_request",
            "Invalid request: " + "; ".join(f"{e['field']} {e['message']}" for e in errors) + ".",
            details={"errors": errors},
        )
    if not (isinstance(resource_id, str) and isinstance(method, str) and isinstance(url, str)):
        raise InvariantError("resource_id, method and url passed validation as strings")
    return resource_id, RailRequest(method.upper(), url), credentials


def _absolute(url: str) -> bool:
    if len(url) > _MAX_URL or not url.isascii() or any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _credentials(value: object, bad: Callable[[str, str], None]) -> dict[str, str]:
    """The credential headers: ``PAYMENT-SIGNATURE`` and/or ``Authorization: Payment …``,
    any case, and nothing else (the seller's app forwards no other header)."""
    if not isinstance(value, dict) or not value:
        bad("headers", "must be an object holding PAYMENT-SIGNATURE or Authorization")
        return {}
    found: dict[str, str] = {}
    for name, header in value.items():
        lowered = name.lower()
        where = f"headers.{name}"
        if lowered not in RAIL_CREDENTIAL_HEADERS:
            bad(where, "is not a credential header (PAYMENT-SIGNATURE, Authorization)")
        elif not isinstance(header, str) or not 0 < len(header) <= _MAX_CREDENTIAL:
            bad(where, f"must be a string of at most {_MAX_CREDENTIAL} characters")
        elif lowered == "authorization" and header[:8].lower() != "payment ":
            bad(where, "must be of the Payment scheme (MPP)")
        elif lowered in found:
            bad(where, "is given twice")
        else:
            found[lowered] = header
    return found


# --- the pipeline, by hand ------------------------------------------------------------------


async def _gate(
    ctx: ServerContext, principal: Principal, resource_id: str, request: Request
) -> open_rails.Gate:
    """The seller's own resource (another seller's id is as unknown as a made-up one)."""
    base = (ctx.settings.public_url or str(request.base_url)).rstrip("/")

    def load() -> open_rails.Gate | None:
        with ctx.db.read() as conn:
            return open_rails.load_gate(
                conn, resource_id, realm=urlsplit(base).netloc, seller_id=principal.seller_id
            )

    gate = await anyio.to_thread.run_sync(load)
    if gate is None:
        raise ApiError("not_found", "No such resource.")
    return gate


def _authenticate(ctx: ServerContext, request: Request) -> Principal:
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    with ctx.db.read() as conn:
        return authenticate(
            conn, request.headers, role=Role.SELLER, jwt_secrets=ctx.jwt_secrets, now=ctx.now()
        )


def _route(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        ctx: ServerContext = request.app.state.ctx
        request_id: str = request.state.request_id
        limit_headers: dict[str, str] = {}
        try:
            client = request.client.host if request.client else None
            identity = ctx.limiter.identity(request.headers, client)
            limit_headers = await anyio.to_thread.run_sync(
                ctx.limiter.hit, ctx.settings.rate_limit, "rate_limit", identity
            )
            body = await read_json_body(request, ctx.settings.max_body_bytes)
            principal = await anyio.to_thread.run_sync(_authenticate, ctx, request)
            if not isinstance(body, dict):
                raise ApiError("invalid_json", "The body must be a JSON object.")
            answer = await handler(ctx, principal, body, request, request_id)
            response = json_response(to_json_body(answer, request_id))
        except DomainError as exc:
            response = error_response(exc, request_id)
        except OperationalError:
            response = error_response(
                ApiError("not_ready", "The database is not reachable; retry shortly."), request_id
            )
        except Exception:
            log.exception("unhandled error in %s (%s)", request.url.path, request_id)
            response = error_response(
                ApiError("internal_error", "The server failed; the request may be retried."),
                request_id,
            )
        for name, value in limit_headers.items():
            response.headers.setdefault(name, value)
        return response

    return serve


ROUTES = [
    Route(prefix + path, _route(handler), methods=["POST"])
    for prefix in ("", "/api")
    for path, handler in (("/gates/challenge", challenge), ("/gates/redeem", redeem))
]


def _documented(path: str, summary: str) -> Endpoint:
    """An entry for the discovery documents only: the routes above serve it."""

    def handler(call: Call) -> Reply:  # pragma: no cover - never routed
        raise AssertionError("served by reference_server.routes.gate_rails")

    handler.__doc__ = summary
    return Endpoint(method="POST", path=path, handler=handler, auth=Role.SELLER)


#: What discovery lists for these routes.
DOCUMENTED = [
    _documented(
        "/gates/challenge",
        "Open-rail challenge (x402 PAYMENT-REQUIRED, MPP WWW-Authenticate) for an unpaid "
        "request {resource_id, method, url} to the seller's own gate; empty until payments "
        "are enabled.",
    ),
    _documented(
        "/gates/redeem",
        "Verify and settle an x402 PAYMENT-SIGNATURE or MPP Authorization: Payment "
        "credential {resource_id, method, url, headers} presented at the seller's own gate.",
    ),
]

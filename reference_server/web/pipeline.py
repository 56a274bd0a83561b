"""The steps every request takes, whichever way its route runs:

    rate limit -> read the JSON body -> [the route's strategy: authenticate ->
    Idempotency-Key -> body by its declared shape -> handler] -> envelope with request_id;
    an unexpected exception -> 500, logged once

:func:`dispatch` is the one entry (``endpoint.routes_for`` mounts it on every route); the
strategy (:mod:`.strategies`) decides where the middle runs -- in one transaction in a
worker thread, grouped with other requests of its caller, or on the event loop -- and
takes the steps it shares with the others from here, in that order.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response

from .. import telemetry
from ..context import ServerContext
from ..domain.errors import DomainError
from ..store.database import in_transaction
from . import idempotency
from .auth import AnyCredential, OptionalAuth, Principal, authenticate, requested_environment
from .call import Call
from .errors import ApiError
from .json_body import read_json_body
from .responses import error_response
from .validate import FOREIGN_JSON, RAW_BODY, read_body

if TYPE_CHECKING:
    from .endpoint import Endpoint

__all__ = [
    "API_PREFIX",
    "Answer",
    "caller",
    "dispatch",
    "in_transaction",
    "key_claim",
    "new_call",
    "read_declared_body",
    "replayed",
]

log = logging.getLogger("reference_server")

#: Every route is served bare and again under this prefix.
API_PREFIX = "/api"

#: What a request is answered with before it becomes a response: status, body, headers.
Answer = tuple[int, dict[str, Any], dict[str, str]]
T = TypeVar("T")


async def dispatch(methods: dict[str, Endpoint], request: Request) -> Response:
    """The pipeline's entry: the endpoint for the request's method (HEAD is GET's)."""
    method = "GET" if request.method == "HEAD" else request.method
    return await _handle(methods[method], request)


async def _handle(ep: Endpoint, request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    telemetry.name_request_span(ep.method, ep.path)
    request_id: str = request.state.request_id
    limit_headers: dict[str, str] = {}
    try:
        if ep.rate_limit is not None:
            identity = ctx.limiter.identity(request.headers, client_of(request))
            spec = getattr(ctx.settings, ep.rate_limit)
            if ctx.limiter.blocking:
                limit_headers = await anyio.to_thread.run_sync(
                    ctx.limiter.hit, spec, ep.rate_limit, identity
                )
            else:
                limit_headers = ctx.limiter.hit(spec, ep.rate_limit, identity)
        reads = ep.writes and ep.body is not RAW_BODY
        body = await _read_json(ep, request, ctx.settings.max_body_bytes) if reads else None
        response = await ep.run.serve(ep, ctx, request, request_id, body)
    except DomainError as exc:
        response = error_response(exc, request_id)
    except OperationalError:
        # Not the route's fault, but an operator must see it (once, with the request id).
        log.warning("database unreachable in %s %s (%s)", ep.method, ep.path, request_id)
        response = error_response(
            ApiError("not_ready", "The database is not reachable; retry shortly."), request_id
        )
    except Exception:
        log.exception("unhandled error in %s %s (%s)", ep.method, ep.path, request_id)
        response = error_response(
            ApiError("internal_error", "The server failed; the request may be retried."),
            request_id,
        )
    for name, value in limit_headers.items():
        response.headers.setdefault(name, value)
    return response


async def _read_json(ep: Endpoint, request: Request, max_bytes: int) -> Any:
    try:
        return await read_json_body(request, max_bytes)
    except ApiError as exc:
        raise _as_invalid_body(ep, exc) from None


# --- the steps a strategy takes, in this order ------------------------------------------------


def caller(
    conn: Connection | None, ep: Endpoint, ctx: ServerContext, headers: Headers, now: datetime
) -> tuple[Principal | None, str]:
    """Who calls (``None`` on a route that lets them stay anonymous) and in which
    environment: the credential's, or without one the header's (absent = live).  Read
    with ``conn`` (the request's own transaction), or in a read transaction of its own."""
    anonymous = isinstance(ep.auth, OptionalAuth) and not (
        "authorization" in headers or "x-svc-vw-key" in headers
    )
    if ep.role is None or anonymous:
        return None, requested_environment(headers) or "live"
    if conn is None:
        with ctx.db.read() as own:
            return caller(own, ep, ctx, headers, now)
    role = None if isinstance(ep.auth, AnyCredential) else ep.role
    principal = authenticate(conn, headers, role=role, jwt_secrets=ctx.jwt_secrets, now=now)
    return principal, principal.environment


def new_call(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    who: tuple[Principal | None, str | None],
    now: datetime,
) -> Call:
    """The call its handler gets, once the caller is known (``who``)."""
    principal, environment = who
    return Call(
        ctx=ctx,
        request=request,
        request_id=request_id,
        principal=principal,
        environment=environment,
        body=_object(body),
        params=request.path_params,
        query=request.query_params,
        base_url=str(request.base_url),
        headers=request.headers,
        client=client_of(request),
        now=now,
    )


def key_claim(ep: Endpoint, ctx: ServerContext, call: Call) -> idempotency.KeyClaim | None:
    """What the request's Idempotency-Key, checked, claims; ``None`` when the route or the
    request has no key to honour."""
    key = call.request.headers.get("idempotency-key")
    if ep.idempotency == "required" and key is None:
        raise ApiError(
            "idempotency_key_required",
            f"{ep.method} {ep.path} needs an Idempotency-Key header (any unique string, "
            "e.g. a UUID, reused when you retry).",
        )
    if key is None or ep.idempotency == "none":
        return None
    principal = call.principal
    return idempotency.KeyClaim(
        scope=principal.credential_id if principal else f"addr:{call.client}",
        route=f"{ep.method} {ep.path}",
        key=idempotency.validate_key(key),
        fingerprint=idempotency.request_fingerprint(ep.method, _bare_path(call.request), call.body),
        now=call.now,
        ttl=timedelta(seconds=ctx.settings.idempotency_ttl_seconds),
        lease=timedelta(seconds=ctx.settings.idempotency_lease_seconds),
    )


def read_declared_body(ep: Endpoint, call: Call) -> Any:
    """The body read by the endpoint's shape (a 422 listing every problem), or ``None``
    for a route that declares none -- and then takes none: ``{"x": 1}`` is refused, not
    ignored (unless the body is another protocol's, ``FOREIGN_JSON``)."""
    if ep.body_class is None:
        if call.body and ep.body is not FOREIGN_JSON:
            errors = [{"field": name, "message": "is not a known field"} for name in call.body]
            raise ApiError(
                ep.contract.invalid_body,
                f"{ep.method} {ep.path} takes no body fields; send {{}} or no body.",
                details={"errors": errors},
            )
        return None
    try:
        return read_body(ep.body_class, call.body, production=call.ctx.settings.production)
    except ApiError as exc:
        raise _as_invalid_body(ep, exc) from None


def replayed(replay: idempotency.Replay, request_id: str) -> Answer:
    """The stored answer again, but its body's request_id names this request (as the
    X-Request-Id header does); the first request's id travels in a header."""
    original = str(replay.body.get("request_id", ""))
    return (
        replay.status,
        {**replay.body, "request_id": request_id},
        {"Idempotent-Replayed": "true", "Original-Request-Id": original},
    )


def client_of(request: Request) -> str | None:
    return request.client.host if request.client else None


def _object(body: Any) -> dict[str, Any]:
    """The JSON body as the handler gets it: an object (none sent: an empty one)."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "The body must be a JSON object.")
    return body


def _as_invalid_body(ep: Endpoint, exc: ApiError) -> ApiError:
    """A field problem answered with the route's own code for a bad body (the gate rails
    document 400 ``invalid_rail_request``), wherever in the pipeline it was found."""
    if exc.code != "validation_error" or ep.contract.invalid_body == exc.code:
        return exc
    return ApiError(ep.contract.invalid_body, exc.message, details=exc.details)


def _bare_path(request: Request) -> str:
    path = request.url.path
    return path.removeprefix(API_PREFIX) if path.startswith(API_PREFIX + "/") else path

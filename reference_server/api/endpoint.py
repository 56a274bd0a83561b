"""The one path every API request takes, so cross-cutting rules hold on every route.

    rate limit -> read and check the JSON body -> authenticate -> idempotency ->
    handler inside one database transaction -> envelope with request_id

Handlers are plain synchronous functions ``(Call) -> Reply`` run in a worker thread:
database work is blocking SQLAlchemy, and keeping it off the event loop lets many
requests wait on locks at once without stalling the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

import anyio.to_thread
import attrs
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..context import ServerContext
from ..domain.errors import DomainError
from ..domain.events import NEW_DELIVERIES
from ..invariant import InvariantError
from ..store.database import is_transient
from . import idempotency
from .auth import Principal, Role, authenticate, requested_environment
from .errors import ApiError, http_error
from .json_body import read_json_body
from .paging import PAGED
from .responses import Reply, error_response, json_response, to_json_body

__all__ = ["Call", "Endpoint", "is_transient", "routes_for"]

log = logging.getLogger("reference_server")

Idempotency = Literal["required", "optional", "none"]
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@attrs.define(kw_only=True)
class Call:
    """Everything a handler gets: the caller, the parsed input, the open transaction."""

    ctx: ServerContext
    conn: Connection
    request_id: str
    principal: Principal | None
    environment: str
    body: dict[str, Any]
    params: Mapping[str, str]
    query: Mapping[str, str]
    base_url: str
    headers: Mapping[str, str]
    client: str | None
    now: datetime

    @property
    def public_url(self) -> str:
        return (self.ctx.settings.public_url or self.base_url).rstrip("/")


Handler = Callable[[Call], Reply]


@attrs.frozen(kw_only=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    auth: Role | None = None
    #: Anonymous callers are served too; a credential, when sent, must be valid for ``auth``.
    auth_optional: bool = False
    idempotency: Idempotency = "none"
    #: Which ``Settings`` attribute holds this route's rate limit.
    rate_limit: str = "rate_limit"

    @property
    def writes(self) -> bool:
        return self.method != "GET"

    @property
    def paged(self) -> bool:
        """A list route: its handler is wrapped by ``paging.paged`` (``limit``,
        ``starting_after`` in; ``has_more`` out)."""
        return bool(getattr(self.handler, PAGED, False))


def routes_for(endpoints: list[Endpoint]) -> list[Route]:
    """One Starlette route per path (bare and under ``/api``), dispatching on method so
    that a wrong method is a 405 with the right ``Allow`` header."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for ep in endpoints:
        by_path.setdefault(ep.path, {})[ep.method] = ep
    routes = []
    for path, methods in by_path.items():
        dispatch = partial(_dispatch, methods)
        for prefix in ("", "/api"):
            routes.append(Route(prefix + path, dispatch, methods=list(methods)))
    return routes


async def _dispatch(methods: dict[str, Endpoint], request: Request) -> Response:
    method = "GET" if request.method == "HEAD" else request.method
    return await _handle(methods[method], request)


async def _handle(ep: Endpoint, request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    request_id: str = request.state.request_id
    limit_headers: dict[str, str] = {}
    try:
        identity = ctx.limiter.identity(request.headers, _client(request))
        spec = getattr(ctx.settings, ep.rate_limit)
        limit_headers = await anyio.to_thread.run_sync(
            ctx.limiter.hit, spec, ep.rate_limit, identity
        )
        body = await read_json_body(request, ctx.settings.max_body_bytes) if ep.writes else None
        status, data, headers = await anyio.to_thread.run_sync(
            partial(_run, ep, ctx, request, request_id, body)
        )
        response = json_response(data, status, headers)
    except DomainError as exc:
        response = error_response(exc, request_id)
    except Exception:
        log.exception("unhandled error in %s %s (%s)", ep.method, ep.path, request_id)
        response = error_response(
            ApiError("internal_error", "The server failed; the request may be retried."),
            request_id,
        )
    for name, value in limit_headers.items():
        response.headers.setdefault(name, value)
    return response


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


def _run(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Authenticate, apply idempotency and run the handler (in a worker thread)."""
    now = ctx.now()
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    principal, environment = _caller(ep, ctx, request.headers, now)
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "The body must be a JSON object.")

    begun = _begin_idempotent(ep, ctx, request, principal, body, now)
    if isinstance(begun, idempotency.Replay):
        # Same answer, but the body's request_id names this request (as the
        # X-Request-Id header does); the first request's id travels in a header.
        original = str(begun.body.get("request_id", ""))
        return (
            begun.status,
            {**begun.body, "request_id": request_id},
            {"Idempotent-Replayed": "true", "Original-Request-Id": original},
        )

    def call_in(conn: Connection) -> Call:
        return Call(
            ctx=ctx,
            conn=conn,
            request_id=request_id,
            principal=principal,
            environment=environment,
            body=body,
            params=request.path_params,
            query=request.query_params,
            base_url=str(request.base_url),
            headers=request.headers,
            client=_client(request),
            now=now,
        )

    try:
        return _in_transaction(ep, ctx, request_id, call_in, begun)
    except DomainError as exc:
        error = http_error(exc)
        if begun is not None and error.status < 500:
            idempotency.store(ctx.db, begun, error.status, error.body(request_id))
        elif begun is not None:
            idempotency.release(ctx.db, begun)
        raise
    except BaseException:
        if begun is not None:
            idempotency.release(ctx.db, begun)
        raise


def _caller(
    ep: Endpoint, ctx: ServerContext, headers: Headers, now: datetime
) -> tuple[Principal | None, str]:
    """Who calls (``None`` on a route that lets them stay anonymous) and in which
    environment: the credential's, or without one the header's (absent = live)."""
    anonymous = ep.auth_optional and not ("authorization" in headers or "x-svc-vw-key" in headers)
    if ep.auth is None or anonymous:
        return None, requested_environment(headers) or "live"
    with ctx.db.read() as conn:
        principal = authenticate(conn, headers, role=ep.auth, jwt_secrets=ctx.jwt_secrets, now=now)
    return principal, principal.environment


def _begin_idempotent(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    principal: Principal | None,
    body: dict[str, Any],
    now: datetime,
) -> idempotency.Begun | idempotency.Replay | None:
    """The request's Idempotency-Key claimed (or its stored answer to replay); ``None``
    when the route or the request has no key to honour."""
    key = request.headers.get("idempotency-key")
    if ep.idempotency == "required" and key is None:
        raise ApiError(
            "idempotency_key_required",
            f"{ep.method} {ep.path} needs an Idempotency-Key header (any unique string, "
            "e.g. a UUID, reused when you retry).",
        )
    if key is None or ep.idempotency == "none":
        return None
    scope = principal.credential_id if principal else f"addr:{_client(request)}"
    return idempotency.begin(
        ctx.db,
        scope=scope,
        route=f"{ep.method} {ep.path}",
        key=idempotency.validate_key(key),
        fingerprint=idempotency.request_fingerprint(ep.method, _bare_path(request), body),
        now=now,
        ttl=timedelta(seconds=ctx.settings.idempotency_ttl_seconds),
        lease=timedelta(seconds=ctx.settings.idempotency_lease_seconds),
        box=ctx.box,
    )


def _in_transaction(
    ep: Endpoint,
    ctx: ServerContext,
    request_id: str,
    call_in: Callable[[Connection], Call],
    begun: idempotency.Begun | None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The handler in one transaction (its idempotent answer stored in the same one),
    run again from the start when the database rolled it back as a deadlock."""
    for attempt in range(_TRANSIENT_RETRIES + 1):
        try:
            with ctx.db.write() if ep.writes else ctx.db.read() as conn:
                reply = ep.handler(call_in(conn))
                deferred = reply.after_commit is not None
                data = {} if deferred else to_json_body(reply.body, request_id)
                if begun is not None:
                    if deferred:  # a route-table mistake, caught by the first test
                        raise InvariantError("idempotent routes answer inside the transaction")
                    box = ctx.box if reply.secret else None
                    idempotency.complete(conn, begun, reply.status, data, box=box)
                queued = conn.info.pop(NEW_DELIVERIES, False)
            if queued:
                ctx.notify_new_events()
            if reply.after_commit is not None:
                reply = reply.after_commit()
                data = to_json_body(reply.body, request_id)
            return reply.status, data, reply.headers
        except DBAPIError as exc:
            # A deadlock or serialization failure rolled the whole transaction back:
            # nothing was written, so running it again is safe.
            if attempt == _TRANSIENT_RETRIES or not is_transient(exc):
                raise
    raise InvariantError("the retry loop returns or raises on its last attempt")


_TRANSIENT_RETRIES = 3


def _bare_path(request: Request) -> str:
    path = request.url.path
    return path[4:] if path.startswith("/api/") else path

"""The one path every request takes, so cross-cutting rules hold on every route.

    rate limit -> read and check the JSON body -> authenticate -> idempotency ->
    handler -> envelope with request_id; an unexpected exception -> 500, logged once

Every route of the app is an :class:`Endpoint` served by :func:`routes_for` (a test checks
the Starlette route table for it).  A handler is one of two kinds:

* **sync** ``def (Call) -> Reply``, run in a worker thread inside one database
  transaction (retried whole on a deadlock), with its idempotent answer stored in the same
  transaction: database work is blocking SQLAlchemy, and keeping it off the event loop
  lets many requests wait on locks at once without stalling the server;
* **async** ``async def (Call) -> Reply | Response``, run on the event loop with no
  transaction and no thread held: for routes that await the network (pay-url, the gate
  rails, the hosted gates), which must not hold either across it.  ``call.conn`` is not
  there; such a handler opens short transactions of its own, and owns its idempotency
  record (the pipeline checks the key's presence and form and hands it over as
  ``call.idempotency_key``).  It may answer any :class:`~starlette.responses.Response`
  (a gate relays its upstream's, ``llms.txt`` is text); an :class:`Endpoint` declared
  ``raw`` gets its body unread (``call.request``) to stream or forward it.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar

import anyio.to_thread
import attrs
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
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
from .auth import Principal, Role, authenticate, credential_of, requested_environment
from .errors import ApiError, http_error
from .group_commit import GroupCommit, Outcome
from .json_body import read_json_body
from .paging import FILTERS, PAGED, Filter
from .responses import Reply, error_response, json_response, to_json_body
from .sdk import Sdk
from .validate import read_body

__all__ = ["API_PREFIX", "Call", "Endpoint", "dispatch", "is_transient", "routes_for"]

log = logging.getLogger("reference_server")

#: Every route is served bare and again under this prefix.
API_PREFIX = "/api"

Idempotency = Literal["required", "optional", "none"]


@attrs.define(kw_only=True)
class Call:
    """Everything a handler gets: the caller, the parsed input, the open transaction
    (sync handlers only), the request itself."""

    ctx: ServerContext
    request: Request
    request_id: str
    principal: Principal | None
    body: dict[str, Any]
    params: Mapping[str, str]
    query: Mapping[str, str]
    base_url: str
    headers: Mapping[str, str]
    client: str | None
    now: datetime
    #: The body read by the endpoint's declared shape (``Endpoint.body``); see :meth:`input`.
    parsed: Any = None
    #: The validated ``Idempotency-Key`` an async handler honours itself (``None``: none).
    idempotency_key: str | None = None
    #: What the endpoint's ``prepare`` returned (async handlers that declare one).
    prepared: Any = None
    _environment: str | None = None
    _conn: Connection | None = None
    #: Stores an answer under the request's Idempotency-Key at once (see :meth:`answer_ahead`).
    _store_answer: Callable[[Reply], None] | None = None
    #: Authenticates and reads the input with a connection (see :meth:`authenticate`).
    _authenticate: Callable[[Connection], None] | None = None

    def authenticate(self, conn: Connection) -> None:
        """Authenticate the caller with ``conn``, the prepare's own transaction, then read
        the input (``Endpoint.prepare_authenticates``): the refusals come in the
        pipeline's order -- the credential, the Idempotency-Key, the body.  Until then
        the call has no principal and ``body`` is the JSON as sent (a dict, or empty)."""
        if self._authenticate is None:
            raise InvariantError("this call was authenticated by the pipeline")
        self._authenticate(conn)

    @property
    def caller(self) -> Principal:
        """The credential's principal, on a route whose endpoint requires one (``auth``
        without ``anonymous``): the pipeline authenticated it before the handler ran."""
        if self.principal is None:
            raise InvariantError("a route that requires a credential ran without one")
        return self.principal

    @property
    def conn(self) -> Connection:
        """The handler's transaction (sync handlers only)."""
        if self._conn is None:
            raise InvariantError("an async handler holds no transaction")
        return self._conn

    def answer_ahead(self, reply: Reply) -> None:
        """Record ``reply`` as this request's idempotent answer now, in its transaction,
        before the handler takes the row locks other requests queue on (``POST /pay``:
        its answer is known before the wallet key is locked), so the write of the answer
        is not one more statement under those locks.  The handler returns that same
        reply; if it returns another (a refusal), that one replaces it, in the same
        transaction: no one ever sees the first.  Without an Idempotency-Key: nothing."""
        if self._store_answer is not None:
            self._store_answer(reply)

    def input(self, cls: type[T]) -> T:
        """The body as the endpoint's declared shape, typed for the handler."""
        if not isinstance(self.parsed, cls):
            raise InvariantError(f"the route declares no body of {cls.__name__}")
        return self.parsed

    @property
    def environment(self) -> str:
        """The credential's environment; without one, the header's (absent = live).  An
        anonymous async route reads the header only when asked (a gate relays its
        client's headers; a stray one is not the gate's to refuse)."""
        if self._environment is None:
            return requested_environment(self.headers) or "live"
        return self._environment

    @property
    def public_url(self) -> str:
        return (self.ctx.settings.public_url or self.base_url).rstrip("/")


T = TypeVar("T")
Handler = Callable[[Call], Reply]
AsyncHandler = Callable[[Call], Awaitable[Reply | Response]]


@attrs.frozen(kw_only=True)
class Endpoint:
    method: str
    path: str
    #: ``def (Call) -> Reply`` (in a transaction) or ``async def`` (none): see above.
    handler: Handler | AsyncHandler
    auth: Role | None = None
    #: Anonymous callers are served too; a credential, when sent, must be valid for ``auth``.
    auth_optional: bool = False
    idempotency: Idempotency = "none"
    #: Which ``Settings`` attribute holds this route's rate limit; ``None``: not limited
    #: (health probes and the discovery documents).
    rate_limit: str | None = "rate_limit"
    #: The body is not read as JSON: the (async) handler reads ``call.request`` itself.
    raw: bool = False
    #: Listed in the discovery documents (the API); probes and the documents are not.
    listed: bool = True
    #: What the discovery documents say of it; by default the handler's first doc line.
    summary: str | None = None
    #: The body's shape (a class of :mod:`svc.bodies`), read by the pipeline before the
    #: handler runs; ``None``: the route takes no body.
    body: type | None = None
    #: The code a body refused by its shape is answered with (the gate rails keep their
    #: documented 400 ``invalid_rail_request``, which svc_asgi reads as a bad credential).
    invalid_body: str = "validation_error"
    #: The answer's shape (a model exported by :mod:`svc`) and its status.
    #: A page for people: it answers HTML (its refusals too), not the JSON envelope.
    page: bool = False
    #: The path holds a secret (a one-time link's token): the access log shows the
    #: route's template instead (:mod:`.access_log`).
    secret_path: bool = False
    #: A gate: it takes a payment in its headers (``X-Svc-Receipt``, x402's
    #: ``PAYMENT-SIGNATURE``, MPP's ``Authorization: Payment``) and answers 402 with the
    #: challenges until paid; the document declares those headers.
    gate: bool = False
    #: The body is another protocol's JSON object (the x402 facilitator's), handed to the
    #: handler as sent; without it, a route that declares no ``body`` takes none.
    foreign_body: bool = False
    #: Several classes when the route answers one of several shapes (``oneOf``).
    response: type | tuple[type, ...] | None = None
    status: int = 200
    #: Error codes the handler itself may answer, beyond those the pipeline answers for
    #: every route of its kind (:mod:`.contract` adds those).
    errors: tuple[str, ...] = ()
    #: Async handlers: blocking work (its own short transactions) run in the worker thread
    #: that authenticates the caller, right after, with the call as the handler gets it;
    #: its result is ``call.prepared``.  One thread hop instead of two before the handler
    #: awaits anything (pay-url begins its attempt there).
    prepare: Callable[[Call], Any] | None = None
    #: ``prepare`` authenticates the caller itself, in the transaction it opens
    #: (:meth:`Call.authenticate`, before it reads the call's input): one transaction
    #: where the pipeline's read and the prepare's own took two (pay-url begins its
    #: attempt in the transaction that authenticates the wallet key).
    prepare_authenticates: bool = False
    #: Concurrent requests of one credential share one transaction (group commit, see
    #: :mod:`.group_commit`): for a sync route that every call of a caller serialises on
    #: one row lock anyway (``POST /pay``: the wallet key's).  Needs a required
    #: Idempotency-Key: a group that fails is run again request by request, and a request
    #: whose group did commit is then answered from its key.
    group_commit: bool = False
    #: A group-commit route's handler for a whole group, ``(calls) -> replies`` (one per
    #: call, in order; the calls share one transaction): to decide the group in fewer
    #: statements than its calls one by one.  Without it, ``handler`` runs on each.
    group_handler: Callable[[list[Call]], list[Reply]] | None = None
    #: How the SDK calls the route (:class:`.sdk.Sdk`; several: one route, several SDK
    #: methods); ``None``: the SDK does not.  ``python -m reference_server.sdk_codegen``
    #: writes the SDK's request specs and namespaces from it.
    sdk: Sdk | tuple[Sdk, ...] | None = None

    @property
    def writes(self) -> bool:
        return self.method != "GET"

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler)

    @property
    def paged(self) -> bool:
        """A list route: its handler is wrapped by ``paging.paged`` (``limit``,
        ``starting_after`` in; ``has_more`` out)."""
        return bool(getattr(self.handler, PAGED, False))

    @property
    def filters(self) -> tuple[Filter, ...]:
        """A list route's own query parameters beside the paging ones."""
        return tuple(getattr(self.handler, FILTERS, ()))


def routes_for(endpoints: list[Endpoint]) -> list[Route]:
    """One Starlette route per path (bare and under ``/api``), dispatching on method so
    that a wrong method is a 405 with the right ``Allow`` header.  Every route's endpoint
    is :func:`dispatch` bound to its methods: nothing else serves a request."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for ep in endpoints:
        if ep.group_commit and (ep.is_async or not ep.writes or ep.idempotency != "required"):
            raise InvariantError(
                f"{ep.method} {ep.path}: group commit needs a sync write route "
                "with a required Idempotency-Key"
            )
        methods = by_path.setdefault(ep.path, {})
        if ep.method in methods:
            raise InvariantError(f"{ep.method} {ep.path} is declared twice")
        methods[ep.method] = ep
    routes = []
    for path, methods in by_path.items():
        serve = partial(dispatch, methods)
        for prefix in ("", API_PREFIX):
            routes.append(Route(prefix + path, serve, methods=list(methods)))
    return routes


async def dispatch(methods: dict[str, Endpoint], request: Request) -> Response:
    """The pipeline's entry: the endpoint for the request's method (HEAD is GET's)."""
    method = "GET" if request.method == "HEAD" else request.method
    return await _handle(methods[method], request)


async def _handle(ep: Endpoint, request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    request_id: str = request.state.request_id
    limit_headers: dict[str, str] = {}
    try:
        if ep.rate_limit is not None:
            identity = ctx.limiter.identity(request.headers, _client(request))
            spec = getattr(ctx.settings, ep.rate_limit)
            if ctx.limiter.blocking:
                limit_headers = await anyio.to_thread.run_sync(
                    ctx.limiter.hit, spec, ep.rate_limit, identity
                )
            else:
                limit_headers = ctx.limiter.hit(spec, ep.rate_limit, identity)
        reads = ep.writes and not ep.raw
        body = await _read_json(ep, request, ctx.settings.max_body_bytes) if reads else None
        if ep.is_async:
            response = await _run_async(ep, ctx, request, request_id, body)
        elif ep.group_commit:
            status, data, headers = await _grouped(ep, ctx, request, request_id, body)
            response = json_response(data, status, headers)
        else:
            status, data, headers = await anyio.to_thread.run_sync(
                partial(_run, ep, ctx, request, request_id, body)
            )
            response = json_response(data, status, headers)
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


def _call(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    caller: tuple[Principal | None, str | None],
    now: datetime,
) -> Call:
    principal, environment = caller
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
        client=_client(request),
        now=now,
    )


def _object(body: Any) -> dict[str, Any]:
    """The JSON body as the handler gets it: an object (none sent: an empty one)."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "The body must be a JSON object.")
    return body


async def _run_async(
    ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
) -> Response:
    """Authenticate and prepare (in one worker thread, if the route takes a credential or
    prepares), check the idempotency key, and await the handler on the event loop."""
    now = ctx.now()
    args = (ep, ctx, request, request_id, body, now)
    if ep.auth is not None or ep.prepare is not None:
        call = await anyio.to_thread.run_sync(_async_call, *args)
    else:
        call = _async_call(*args)
    pending = ep.handler(call)
    if not inspect.isawaitable(pending):
        raise InvariantError(f"{ep.method} {ep.path}: an async handler returns an awaitable")
    answer = await pending
    if isinstance(answer, Response):
        return answer
    if answer.after_commit is not None:
        raise InvariantError("an async handler has no transaction to answer after")
    return json_response(to_json_body(answer.body, request_id), answer.status, answer.headers)


def _async_call(
    ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any, now: datetime
) -> Call:
    """The call an async handler gets: authenticated and prepared (blocking when the
    route takes a credential or prepares)."""
    if ep.prepare is not None and ep.prepare_authenticates:
        return _call_authenticated_by_prepare(ep, ep.prepare, ctx, request, request_id, body, now)
    caller: tuple[Principal | None, str | None] = (None, None)
    if ep.auth is not None:
        caller = _authenticated(ep, ctx, request.headers, now)
    call = _call(ep, ctx, request, request_id, body, caller, now)
    call.idempotency_key = _idempotency_key(ep, request)
    call.parsed = _read_declared_body(ep, call)
    if ep.prepare is not None:
        call.prepared = ep.prepare(call)
    return call


def _call_authenticated_by_prepare(
    ep: Endpoint,
    prepare: Callable[[Call], Any],
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    now: datetime,
) -> Call:
    """:func:`_async_call` for a prepare that authenticates in its own transaction: the
    same steps in the same order, the first of them with the prepare's connection."""
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    sent = body if isinstance(body, dict) else {}
    call = _call(ep, ctx, request, request_id, sent, (None, None), now)
    authenticated = False

    def authenticate(conn: Connection) -> None:
        nonlocal authenticated
        call.principal, call._environment = _caller_in(conn, ep, ctx, request.headers, now)
        call.body = _object(body)
        call.idempotency_key = _idempotency_key(ep, request)
        call.parsed = _read_declared_body(ep, call)
        authenticated = True

    call._authenticate = authenticate
    call.prepared = prepare(call)
    if not authenticated:
        raise InvariantError(f"{ep.method} {ep.path}: its prepare did not authenticate")
    return call


def _read_declared_body(ep: Endpoint, call: Call) -> Any:
    """The body read by the endpoint's shape (a 422 listing every problem), or ``None``
    for a route that declares none -- and then takes none: ``{"x": 1}`` is refused, not
    ignored (unless the body is another protocol's, ``foreign_body``)."""
    if ep.body is None:
        if call.body and not ep.foreign_body:
            errors = [{"field": name, "message": "is not a known field"} for name in call.body]
            raise ApiError(
                ep.invalid_body,
                f"{ep.method} {ep.path} takes no body fields; send {{}} or no body.",
                details={"errors": errors},
            )
        return None
    try:
        return read_body(ep.body, call.body, production=call.ctx.settings.production)
    except ApiError as exc:
        raise _as_invalid_body(ep, exc) from None


async def _read_json(ep: Endpoint, request: Request, max_bytes: int) -> Any:
    try:
        return await read_json_body(request, max_bytes)
    except ApiError as exc:
        raise _as_invalid_body(ep, exc) from None


def _as_invalid_body(ep: Endpoint, exc: ApiError) -> ApiError:
    """A field problem answered with the route's own code for a bad body (the gate rails
    document 400 ``invalid_rail_request``), wherever in the pipeline it was found."""
    if exc.code != "validation_error" or ep.invalid_body == exc.code:
        return exc
    return ApiError(ep.invalid_body, exc.message, details=exc.details)


def _authenticated(
    ep: Endpoint, ctx: ServerContext, headers: Headers, now: datetime
) -> tuple[Principal | None, str]:
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    return _caller(ep, ctx, headers, now)


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


def _run(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Authenticate, apply idempotency and run the handler (in a worker thread), all in
    one transaction on one pooled connection; a refusal is stored under the key after."""
    now = ctx.now()
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    claimed: list[idempotency.KeyClaim] = []  # the key this request took, if any
    try:
        return _in_transaction(ep, ctx, request, request_id, body, now, claimed)
    except DomainError as exc:
        error = http_error(exc)
        if claimed and error.status < 500:
            idempotency.store_refusal(
                ctx.db, claimed[0], error.status, error.body(request_id), ctx.box
            )
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
        return _caller_in(conn, ep, ctx, headers, now)


def _caller_in(
    conn: Connection, ep: Endpoint, ctx: ServerContext, headers: Headers, now: datetime
) -> tuple[Principal | None, str]:
    """:func:`_caller` inside the request's own transaction (sync routes)."""
    anonymous = ep.auth_optional and not ("authorization" in headers or "x-svc-vw-key" in headers)
    if ep.auth is None or anonymous:
        return None, requested_environment(headers) or "live"
    principal = authenticate(conn, headers, role=ep.auth, jwt_secrets=ctx.jwt_secrets, now=now)
    return principal, principal.environment


def _key_claim(
    ep: Endpoint, ctx: ServerContext, request: Request, call: Call
) -> idempotency.KeyClaim | None:
    """What the request's Idempotency-Key claims; ``None`` when the route or the request
    has no key to honour."""
    key = _idempotency_key(ep, request)
    if key is None:
        return None
    principal = call.principal
    return idempotency.KeyClaim(
        scope=principal.credential_id if principal else f"addr:{_client(request)}",
        route=f"{ep.method} {ep.path}",
        key=key,
        fingerprint=idempotency.request_fingerprint(ep.method, _bare_path(request), call.body),
        now=call.now,
        ttl=timedelta(seconds=ctx.settings.idempotency_ttl_seconds),
        lease=timedelta(seconds=ctx.settings.idempotency_lease_seconds),
    )


def _idempotency_key(ep: Endpoint, request: Request) -> str | None:
    """The request's Idempotency-Key, checked; ``None`` when the route or the request has
    no key to honour."""
    key = request.headers.get("idempotency-key")
    if ep.idempotency == "required" and key is None:
        raise ApiError(
            "idempotency_key_required",
            f"{ep.method} {ep.path} needs an Idempotency-Key header (any unique string, "
            "e.g. a UUID, reused when you retry).",
        )
    if key is None or ep.idempotency == "none":
        return None
    return idempotency.validate_key(key)


def _in_transaction(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    now: datetime,
    claimed: list[idempotency.KeyClaim],
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The caller, the key, the handler and its idempotent answer in one transaction,
    run again from the start when the database rolled it back as a deadlock, or when the
    connection turned out dead before the commit was sent."""
    for attempt in range(_TRANSIENT_RETRIES + 1):
        committing = False
        try:
            with ctx.db.write() if ep.writes else ctx.db.read() as conn:
                done = _attempt(conn, ep, ctx, request, request_id, body, now, claimed)
                committing = True
            if isinstance(done, tuple):
                return done  # a replay
            if done.queued:
                ctx.notify_new_events()
            return _committed(done, request_id)
        except DBAPIError as exc:
            # A deadlock or serialization failure rolled the whole transaction back, as
            # did a connection found dead before the commit: nothing was written, so
            # running it again is safe.
            dead = exc.connection_invalidated and not committing
            if attempt == _TRANSIENT_RETRIES or not (is_transient(exc) or dead):
                raise
    raise InvariantError("the retry loop returns or raises on its last attempt")


@attrs.frozen
class _Done:
    """A handler's answer, to send once its transaction committed."""

    reply: Reply
    data: dict[str, Any]
    queued: bool


def _committed(done: _Done, request_id: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The answer to send once ``done``'s transaction committed."""
    reply, data = done.reply, done.data
    if reply.after_commit is not None:
        reply = reply.after_commit()
        data = to_json_body(reply.body, request_id)
    return reply.status, data, reply.headers


@attrs.frozen
class _Grouped:
    """A request of a group-commit route, queued for its caller's next group."""

    request: Request
    request_id: str
    body: Any


async def _grouped(
    ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Run the request in its caller's next group (one transaction for the requests of
    one credential that arrived meanwhile; :mod:`.group_commit`)."""
    name = f"{ep.method} {ep.path}"
    groups = ctx.group_commits.get(name)
    if groups is None:
        groups = ctx.group_commits[name] = GroupCommit(partial(_run_group, ep, ctx))
    result: tuple[int, dict[str, Any], dict[str, str]] = await groups.submit(
        credential_of(request.headers), _Grouped(request, request_id, body)
    )
    return result


def _run_group(ep: Endpoint, ctx: ServerContext, group: list[_Grouped]) -> list[Outcome]:
    """A group's requests in one transaction, each through the whole pipeline in turn
    (authentication, its key, the handler, its stored answer), as if it ran alone right
    after the one before.  If any of them fails (a refusal the handler raises rather than
    answers, a deadlock, anything) the transaction rolls back whole and each request runs
    again alone, in a transaction of its own, exactly as an ungrouped request does (a
    refusal is then stored under its key): the failures are rare, and that way each is
    answered as it would be alone."""
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    if len(group) > 1 or ep.group_handler is not None:
        try:
            return [Outcome(value) for value in _in_one_transaction(ep, ctx, group)]
        except Exception:
            log.debug(
                "%s %s: a group of %d runs request by request", ep.method, ep.path, len(group)
            )
    outcomes = []
    for item in group:
        try:
            outcomes.append(Outcome(_run(ep, ctx, item.request, item.request_id, item.body)))
        except Exception as exc:
            outcomes.append(Outcome(error=exc))
    return outcomes


def _in_one_transaction(
    ep: Endpoint, ctx: ServerContext, group: list[_Grouped]
) -> list[tuple[int, dict[str, Any], dict[str, str]]]:
    """The group's requests in one transaction: each authenticated, their keys claimed
    (in one statement; a key already answered is replayed), then the handler (the
    route's ``group_handler`` on all of them at once, or its handler on each in turn),
    then every answer stored under its key, in one statement.

    A lone request (the usual case at one client) claims its key with its answer, at
    the end (``idempotency.claim_answered``): one statement instead of two.  A key
    recorded already (a retry) is found only then, and the request runs again alone,
    claiming first (:func:`_run`), to be answered from the record."""
    answers: list[tuple[int, dict[str, Any], dict[str, str]] | None] = [None] * len(group)
    lone = len(group) == 1
    with ctx.db.write() as conn:
        calls: list[tuple[int, Call, _Claimed]] = []
        for index, claimed in enumerate(_claimed_group(conn, ep, ctx, group, defer=lone)):
            if isinstance(claimed, tuple):
                answers[index] = claimed  # a replay
            else:
                call = claimed.call
                call.parsed = _read_declared_body(ep, call)
                calls.append((index, attrs.evolve(call, conn=conn), claimed))
        bound = [call for _, call, _ in calls]
        if ep.group_handler is not None:
            replies = ep.group_handler(bound) if bound else []
        else:
            replies = [_sync_handler(ep)(call) for call in bound]
        if len(replies) != len(calls):
            raise InvariantError(f"{ep.method} {ep.path}: a group handler answers each call")
        stored = []
        for (index, call, claimed), reply in zip(calls, replies, strict=True):
            if not isinstance(reply, Reply) or reply.after_commit is not None:
                raise InvariantError("a group-commit route answers a Reply, in its transaction")
            data = to_json_body(reply.body, call.request_id)
            raw = json.dumps(data)
            body = ctx.box.seal(raw) if reply.secret else raw
            if claimed.begun is None:  # a lone request: its key claimed with its answer
                idempotency.claim_answered(conn, claimed.want, reply.status, body)
            else:
                stored.append((claimed.begun, reply.status, body))
            answers[index] = (reply.status, data, reply.headers)
        idempotency.complete_many(conn, stored)
        queued = bool(conn.info.pop(NEW_DELIVERIES, False))
    if queued:
        ctx.notify_new_events()
    return [answer for answer in answers if answer is not None]


@attrs.frozen
class _Claimed:
    """A request of a group that owns its key and must run (``begun``), or that claims
    it with its answer (``None``: a lone request, :func:`_in_one_transaction`)."""

    call: Call
    want: idempotency.KeyClaim
    begun: idempotency.Begun | None


def _claimed_group(
    conn: Connection, ep: Endpoint, ctx: ServerContext, group: list[_Grouped], *, defer: bool
) -> list[_Claimed | tuple[int, dict[str, Any], dict[str, str]]]:
    """Each request of the group authenticated (once per credential: its requests run
    within milliseconds of each other, in one transaction) and its key claimed (all in
    one statement; not yet with ``defer``): the call to run, or the stored answer to
    replay."""
    callers: dict[tuple[str | None, ...], tuple[Principal | None, str | None]] = {}
    wanted: list[tuple[Call, idempotency.KeyClaim]] = []
    for item in group:
        now = ctx.now()
        headers = item.request.headers
        credential = credential_of(headers)
        caller = callers.get(credential)
        if caller is None:
            caller = callers[credential] = _caller_in(conn, ep, ctx, headers, now)
        call = _call(ep, ctx, item.request, item.request_id, item.body, caller, now)
        want = _key_claim(ep, ctx, item.request, call)
        if want is None:
            raise InvariantError("a group-commit route requires an Idempotency-Key")
        wanted.append((call, want))
    if defer:
        return [_Claimed(call, want, None) for call, want in wanted]
    claimed = idempotency.claim_many(conn, [want for _, want in wanted], ctx.box)
    return [
        _replayed(begun, call.request_id)
        if isinstance(begun, idempotency.Replay)
        else _Claimed(call, want, begun)
        for (call, want), begun in zip(wanted, claimed, strict=True)
    ]


def _sync_handler(ep: Endpoint) -> Handler:
    if ep.is_async:
        raise InvariantError(f"{ep.method} {ep.path} is async")
    return ep.handler  # type: ignore[return-value]


def _attempt(
    conn: Connection,
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    now: datetime,
    claimed: list[idempotency.KeyClaim],
) -> _Done | tuple[int, dict[str, Any], dict[str, str]]:
    """One run of the request in ``conn``'s transaction: the answer, or a replay."""
    call = _call(
        ep, ctx, request, request_id, body, _caller_in(conn, ep, ctx, request.headers, now), now
    )
    want = _key_claim(ep, ctx, request, call)
    begun = None if want is None else idempotency.claim(conn, want, ctx.box)
    if isinstance(begun, idempotency.Replay):
        return _replayed(begun, request_id)
    if want is not None and not claimed:
        claimed.append(want)
    # Read after the key is claimed: a refused body is an answer, stored and replayed.
    call.parsed = _read_declared_body(ep, call)
    stored: list[tuple[Reply, dict[str, Any]]] = []  # the answer already under the key

    def store(reply: Reply) -> None:
        if begun is None:
            return
        if reply.after_commit is not None:  # a route-table mistake, caught by the first test
            raise InvariantError("idempotent routes answer inside the transaction")
        data = to_json_body(reply.body, request_id)
        idempotency.complete(conn, begun, reply.status, data, box=ctx.box if reply.secret else None)
        stored[:] = [(reply, data)]

    reply = ep.handler(attrs.evolve(call, conn=conn, store_answer=store))
    if not isinstance(reply, Reply):
        raise InvariantError(f"{ep.method} {ep.path}: a sync handler returns a Reply")
    if begun is not None and not (stored and stored[0][0] is reply):  # not answered ahead
        store(reply)
    if stored:
        data = stored[0][1]
    else:
        data = {} if reply.after_commit is not None else to_json_body(reply.body, request_id)
    return _Done(reply, data, bool(conn.info.pop(NEW_DELIVERIES, False)))


def _replayed(
    replay: idempotency.Replay, request_id: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The stored answer again, but its body's request_id names this request (as the
    X-Request-Id header does); the first request's id travels in a header."""
    original = str(replay.body.get("request_id", ""))
    return (
        replay.status,
        {**replay.body, "request_id": request_id},
        {"Idempotent-Replayed": "true", "Original-Request-Id": original},
    )


_TRANSIENT_RETRIES = 3


def _bare_path(request: Request) -> str:
    path = request.url.path
    return path.removeprefix(API_PREFIX) if path.startswith(API_PREFIX + "/") else path

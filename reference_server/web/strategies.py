"""How a route runs, once the pipeline (:mod:`.pipeline`) has limited it and read its JSON:
one strategy object per route (``Endpoint.run``): :class:`Transaction`, :class:`Grouped` or
:class:`Flow` (docs/architecture.md).  Database work is blocking SQLAlchemy; keeping it off
the event loop lets many requests wait on locks at once without stalling the server.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
import attrs
from sqlalchemy import Connection
from starlette.requests import Request
from starlette.responses import Response

from ..context import ServerContext
from ..domain.errors import DomainError
from ..domain.events import NEW_DELIVERIES
from ..invariant import InvariantError
from . import idempotency
from .auth import Principal, credential_of
from .call import AsyncHandler, Call, Handler
from .errors import http_error
from .group_commit import GroupCommit, Outcome
from .pipeline import (
    Answer,
    caller,
    in_transaction,
    key_claim,
    new_call,
    read_declared_body,
    replayed,
)
from .responses import Reply, json_response, to_json_body

if TYPE_CHECKING:
    from .endpoint import Endpoint

__all__ = ["Flow", "Grouped", "Strategy", "Transaction"]

log = logging.getLogger("reference_server")


class Strategy(Protocol):
    """How a route's request is run after the shared first steps (limit, JSON body)."""

    def check(self, ep: Endpoint) -> None:
        """Refuse (``InvariantError``) an endpoint this strategy cannot run."""

    async def serve(
        self, ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
    ) -> Response:
        """Authenticate, honour the key, read the body by its shape, run the handler."""


# --- in one transaction ---------------------------------------------------------------------


@attrs.frozen
class Transaction:
    """Authenticate, claim the Idempotency-Key and run the handler in one transaction
    on one pooled connection, in a worker thread; a refusal is stored under the key after."""

    def check(self, ep: Endpoint) -> None:
        _sync_handler(ep)

    async def serve(
        self, ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
    ) -> Response:
        status, data, headers = await anyio.to_thread.run_sync(
            partial(run_alone, ep, ctx, request, request_id, body)
        )
        return json_response(data, status, headers)


def run_alone(
    ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
) -> Answer:
    """:class:`Transaction`'s work, blocking: the answer once committed."""
    now = ctx.now()
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    claimed: list[idempotency.KeyClaim] = []  # the key this request took, if any
    try:
        done = in_transaction(
            ctx, ep.writes, partial(_attempt, ep, ctx, request, request_id, body, now, claimed)
        )
    except DomainError as exc:
        error = http_error(exc)
        if claimed and error.status < 500:
            idempotency.store_refusal(
                ctx.db, claimed[0], error.status, error.body(request_id), ctx.box
            )
        raise
    if isinstance(done, tuple):
        return done  # a replay
    reply, data = done.reply, done.data
    if reply.after_commit is not None:
        reply = reply.after_commit()
        data = to_json_body(reply.body, request_id)
    return reply.status, data, reply.headers


@attrs.frozen
class _Done:
    """A handler's answer, to send once its transaction committed."""

    reply: Reply
    data: dict[str, Any]


def _attempt(
    ep: Endpoint,
    ctx: ServerContext,
    request: Request,
    request_id: str,
    body: Any,
    now: datetime,
    claimed: list[idempotency.KeyClaim],
    conn: Connection,
) -> _Done | Answer:
    """One run of the request in ``conn``'s transaction: the answer, or a replay."""
    call = new_call(
        ep, ctx, request, request_id, body, caller(conn, ep, ctx, request.headers, now), now
    )
    want = call.key = key_claim(ep, ctx, call)
    begun = None if want is None else idempotency.claim(conn, want, ctx.box)
    if isinstance(begun, idempotency.Replay):
        return replayed(begun, request_id)
    if want is not None and not claimed:
        claimed.append(want)
    # Read after the key is claimed: a refused body is an answer, stored and replayed.
    call.parsed = read_declared_body(ep, call)
    stored: list[tuple[Reply, dict[str, Any]]] = []  # the answer already under the key

    def store(reply: Reply) -> None:
        if begun is None:
            return
        if reply.after_commit is not None:  # a route-table mistake, caught by the first test
            raise InvariantError("idempotent routes answer inside the transaction")
        data = to_json_body(reply.body, request_id)
        if reply.unsettled:  # the repeat runs again (see Reply.unsettled)
            idempotency.lapse(conn, begun)
        else:
            box = ctx.box if reply.secret else None
            idempotency.complete(conn, begun, reply.status, data, box=box)
        stored[:] = [(reply, data)]

    reply = _sync_handler(ep)(attrs.evolve(call, conn=conn, store_answer=store))
    if not isinstance(reply, Reply):
        raise InvariantError(f"{ep.method} {ep.path}: a sync handler returns a Reply")
    if begun is not None and not (stored and stored[0][0] is reply):  # not answered ahead
        store(reply)
    if stored:
        data = stored[0][1]
    else:
        data = {} if reply.after_commit is not None else to_json_body(reply.body, request_id)
    return _Done(reply, data)


def _sync_handler(ep: Endpoint) -> Handler:
    if inspect.iscoroutinefunction(ep.handler):
        raise InvariantError(f"{ep.method} {ep.path}: an async handler runs as a Flow")
    return ep.handler  # type: ignore[return-value]


# --- grouped with the caller's other requests -----------------------------------------------


@attrs.frozen
class Grouped:
    """Concurrent requests of one credential share one transaction: for a route that
    every call of a caller serialises on one row lock anyway (``POST /pay``: the wallet
    key's).  Needs a required Idempotency-Key: a group that fails is run again request by
    request, and a request whose group did commit is then answered from its key.

    ``batch``, ``(calls) -> replies`` (one per call, in order, in the group's one
    transaction), decides a whole group in fewer statements than the handler on each
    call; without it the handler runs on each in turn."""

    batch: Callable[[list[Call]], list[Reply]] | None = None

    def check(self, ep: Endpoint) -> None:
        _sync_handler(ep)
        if not ep.writes or ep.idempotency != "required":
            raise InvariantError(
                f"{ep.method} {ep.path}: group commit needs a sync write route "
                "with a required Idempotency-Key"
            )

    async def serve(
        self, ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
    ) -> Response:
        """Run the request in its caller's next group (one transaction for the requests
        of one credential that arrived meanwhile)."""
        name = f"{ep.method} {ep.path}"
        groups = ctx.group_commits.get(name)
        if groups is None:
            groups = ctx.group_commits[name] = GroupCommit(partial(_run_group, ep, ctx, self.batch))
        status, data, headers = await groups.submit(
            credential_of(request.headers), _Queued(request, request_id, body)
        )
        return json_response(data, status, headers)


@attrs.frozen
class _Queued:
    """A request of a grouped route, queued for its caller's next group."""

    request: Request
    request_id: str
    body: Any


def _run_group(
    ep: Endpoint,
    ctx: ServerContext,
    batch: Callable[[list[Call]], list[Reply]] | None,
    group: list[_Queued],
) -> list[Outcome]:
    """A group's requests in one transaction, each through the whole pipeline in turn
    (authentication, its key, the handler, its stored answer), as if it ran alone right
    after the one before.  If any of them fails (a refusal the handler raises rather than
    answers, a deadlock, anything) the transaction rolls back whole and each request runs
    again alone, in a transaction of its own, exactly as an ungrouped request does (a
    refusal is then stored under its key): the failures are rare, and that way each is
    answered as it would be alone."""
    ctx.load_secrets()  # before any transaction opens: the first load writes once
    try:
        return [Outcome(value) for value in _in_one_transaction(ep, ctx, batch, group)]
    except Exception:
        log.debug("%s %s: a group of %d runs request by request", ep.method, ep.path, len(group))
    outcomes = []
    for item in group:
        try:
            outcomes.append(Outcome(run_alone(ep, ctx, item.request, item.request_id, item.body)))
        except Exception as exc:
            outcomes.append(Outcome(error=exc))
    return outcomes


def _in_one_transaction(
    ep: Endpoint,
    ctx: ServerContext,
    batch: Callable[[list[Call]], list[Reply]] | None,
    group: list[_Queued],
) -> list[Answer]:
    """The group's requests in one transaction: each authenticated, their keys claimed
    (in one statement; a key already answered is replayed), then the route's ``batch`` on
    all of them at once or its handler on each in turn, then every answer stored under
    its key, in one statement.

    A lone request (the usual case at one client) claims its key with its answer, at
    the end (``idempotency.claim_answered``): one statement instead of two.  A key
    recorded already (a retry) is found only then, and the request runs again alone,
    claiming first (:func:`run_alone`), to be answered from the record."""
    answers: list[Answer | None] = [None] * len(group)
    lone = len(group) == 1
    handler = _sync_handler(ep)
    with ctx.db.write() as conn:
        calls: list[tuple[int, Call, _Claimed]] = []
        for index, claimed in enumerate(_claimed_group(conn, ep, ctx, group, defer=lone)):
            if isinstance(claimed, tuple):
                answers[index] = claimed  # a replay
                continue
            call = claimed.call
            call.parsed = read_declared_body(ep, call)
            calls.append((index, attrs.evolve(call, conn=conn), claimed))
        bound = [call for _, call, _ in calls]
        if batch is not None:
            replies = batch(bound) if bound else []
        else:
            replies = [handler(call) for call in bound]
        if len(replies) != len(calls):
            raise InvariantError(f"{ep.method} {ep.path}: a group's batch answers each call")
        stored: list[tuple[idempotency.Begun, int, str]] = []
        for (index, call, claimed), reply in zip(calls, replies, strict=True):
            if not isinstance(reply, Reply) or reply.after_commit is not None:
                raise InvariantError("a grouped route answers a Reply, in its transaction")
            data = to_json_body(reply.body, call.request_id)
            raw = json.dumps(data)
            sealed = ctx.box.seal(raw) if reply.secret else raw
            _keep(conn, claimed, reply, sealed, stored)
            answers[index] = (reply.status, data, reply.headers)
        idempotency.complete_many(conn, stored)
        queued = bool(conn.info.pop(NEW_DELIVERIES, False))
    if queued:
        ctx.notify_new_events()
    return [answer for answer in answers if answer is not None]


def _keep(
    conn: Connection,
    claimed: _Claimed,
    reply: Reply,
    sealed: str,
    stored: list[tuple[idempotency.Begun, int, str]],
) -> None:
    """Keep a group's answer under its key: claimed with it (a lone request), or added to
    ``stored`` (written together); an unsettled one leaves the key open to run again."""
    if reply.unsettled:
        if claimed.begun is not None:
            idempotency.lapse(conn, claimed.begun)
    elif claimed.begun is None:
        idempotency.claim_answered(conn, claimed.want, reply.status, sealed)
    else:
        stored.append((claimed.begun, reply.status, sealed))


@attrs.frozen
class _Claimed:
    """A request of a group that owns its key and must run (``begun``), or that claims
    it with its answer (``None``: a lone request, :func:`_in_one_transaction`)."""

    call: Call
    want: idempotency.KeyClaim
    begun: idempotency.Begun | None


def _claimed_group(
    conn: Connection, ep: Endpoint, ctx: ServerContext, group: list[_Queued], *, defer: bool
) -> list[_Claimed | Answer]:
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
        who = callers.get(credential)
        if who is None:
            who = callers[credential] = caller(conn, ep, ctx, headers, now)
        call = new_call(ep, ctx, item.request, item.request_id, item.body, who, now)
        want = call.key = key_claim(ep, ctx, call)
        if want is None:
            raise InvariantError("a grouped route requires an Idempotency-Key")
        wanted.append((call, want))
    if defer:
        return [_Claimed(call, want, None) for call, want in wanted]
    claimed = idempotency.claim_many(conn, [want for _, want in wanted], ctx.box)
    return [
        replayed(begun, call.request_id)
        if isinstance(begun, idempotency.Replay)
        else _Claimed(call, want, begun)
        for (call, want), begun in zip(wanted, claimed, strict=True)
    ]


def _async_handler(ep: Endpoint) -> AsyncHandler:
    if not inspect.iscoroutinefunction(ep.handler):
        raise InvariantError(f"{ep.method} {ep.path}: a Flow's handler is async")
    return ep.handler


# --- on the event loop ----------------------------------------------------------------------


@attrs.frozen
class Flow:
    """An ``async`` handler awaited on the event loop, holding no transaction and no
    thread across its network I/O; ``call.conn`` is not there, so it opens short
    transactions of its own and claims its Idempotency-Key itself (the pipeline checks
    the key's presence and form and hands its claim over as ``call.key``).  It may
    answer any :class:`~starlette.responses.Response` (a gate relays its upstream's).

    ``start``: a blocking first step run in the worker thread and the transaction that
    authenticate the caller, right after the pipeline's steps, with the call as the
    handler gets it plus ``call.conn``; its result is ``call.started``."""

    start: Callable[[Call], Any] | None = None

    def check(self, ep: Endpoint) -> None:
        _async_handler(ep)

    async def serve(
        self, ep: Endpoint, ctx: ServerContext, request: Request, request_id: str, body: Any
    ) -> Response:
        args = (ep, ctx, request, request_id, body, ctx.now())
        if ep.role is not None or self.start is not None:
            call = await anyio.to_thread.run_sync(self._call, *args)
        else:
            call = self._call(*args)
        answer = await _async_handler(ep)(call)
        if isinstance(answer, Response):
            return answer
        if answer.after_commit is not None:
            raise InvariantError("a flow has no transaction to answer after")
        return json_response(to_json_body(answer.body, request_id), answer.status, answer.headers)

    def _call(
        self,
        ep: Endpoint,
        ctx: ServerContext,
        request: Request,
        request_id: str,
        body: Any,
        now: datetime,
    ) -> Call:
        """The call the handler gets: authenticated (blocking when the route takes a
        credential) and started (in the transaction that authenticated it)."""
        if ep.role is not None or self.start is not None:
            ctx.load_secrets()  # before any transaction opens: the first load writes once

        def steps(conn: Connection | None) -> Call:
            # Anonymous: the environment header is read only when asked (a gate relays
            # its client's headers; a stray one is not the gate's to refuse).
            who: tuple[Principal | None, str | None] = (None, None)
            if ep.role is not None:
                who = caller(conn, ep, ctx, request.headers, now)
            call = new_call(ep, ctx, request, request_id, body, who, now)
            call.key = key_claim(ep, ctx, call)
            call.parsed = read_declared_body(ep, call)
            if self.start is not None and conn is not None:
                call.started = self.start(attrs.evolve(call, conn=conn))
            return call

        if self.start is None:
            return steps(None)
        return in_transaction(ctx, ep.writes, steps)

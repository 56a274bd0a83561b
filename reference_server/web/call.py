"""What a handler gets: the caller, the input read by its declared shape, the request,
and (a route run in a transaction) the open connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import attrs
from sqlalchemy import Connection, Row
from starlette.requests import Request
from starlette.responses import Response

from ..context import ServerContext
from ..invariant import InvariantError
from .auth import Principal, requested_environment
from .idempotency import KeyClaim
from .responses import Reply

__all__ = ["AsyncHandler", "Call", "Handler"]

T = TypeVar("T")


@attrs.define(kw_only=True)
class Call:
    """Everything a handler gets: the caller, the parsed input, the open transaction
    (routes run in one), the request itself."""

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
    #: The request's ``Idempotency-Key`` as the store claims it, for a flow to claim
    #: (``idempotency.claim``) in its own transaction (``None``: none to honour).
    key: KeyClaim | None = None
    #: What the flow's first step returned (``strategies.Flow(start=...)``).
    started: Any = None
    _environment: str | None = None
    _conn: Connection | None = None
    #: Stores an answer under the request's Idempotency-Key at once (see :meth:`answer_ahead`).
    _store_answer: Callable[[Reply], None] | None = None

    @property
    def caller(self) -> Principal:
        """The credential's principal, on a route whose endpoint requires one (``auth``
        without ``optional``): the pipeline authenticated it before the handler ran."""
        if self.principal is None:
            raise InvariantError("a route that requires a credential ran without one")
        return self.principal

    @property
    def conn(self) -> Connection:
        """The handler's transaction (a route run in one, or a flow's first step)."""
        if self._conn is None:
            raise InvariantError("a flow holds no transaction")
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

    def owned(self, find: Callable[..., Row[Any]], param: str) -> Row[Any]:
        """What ``find`` reads for the path's ``param`` among the caller's owner's rows in
        this environment (``find`` answers 404 for any other)."""
        owner_id = self.caller.owner_id
        return find(self.conn, self.params[param], owner_id=owner_id, environment=self.environment)

    def input(self, cls: type[T]) -> T:
        """The body as the endpoint's declared shape, typed for the handler."""
        if not isinstance(self.parsed, cls):
            raise InvariantError(f"the route declares no body of {cls.__name__}")
        return self.parsed

    @property
    def environment(self) -> str:
        """The credential's environment; without one, the header's (absent = live).  An
        anonymous flow reads the header only when asked (a gate relays its client's
        headers; a stray one is not the gate's to refuse)."""
        if self._environment is None:
            return requested_environment(self.headers) or "live"
        return self._environment

    @property
    def public_url(self) -> str:
        return (self.ctx.settings.public_url or self.base_url).rstrip("/")


Handler = Callable[[Call], Reply]
AsyncHandler = Callable[[Call], Awaitable[Reply | Response]]

"""The one paging contract every list route follows (docs/api.md, "Lists").

    GET /resources?limit=2&starting_after=res_...   ->   {data: [...], has_more: true}

``limit`` is 1 to :data:`MAX_LIMIT` (default :data:`DEFAULT_LIMIT`); ``starting_after`` is
the id of the last item of the previous page (Stripe's contract) and must name an item of
the same list that the caller can see.  Anything else is a 422 ``validation_error`` naming
the parameter, before the database is asked: a cursor is checked against the shape of an
id first, so NUL bytes or garbage never reach a query.

A list route is a handler decorated with :func:`paged` (which parses the parameters and
marks the route, so ``Endpoint.paged`` is true and the route-table tests find it) that
answers with :func:`page`: a keyset query on ``(created_at, id)`` in the route's order.
Keyset, not offset: an item created or deleted while a client pages never makes another
one skipped or seen twice, and equal ``created_at`` values are ordered by ``id``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import attrs
from sqlalchemy import ColumnElement, Connection, Row, Select, Table, and_, or_, select

from .errors import ApiError

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "PAGED",
    "PARAMETERS",
    "Page",
    "PageRequest",
    "page",
    "paged",
    "parse",
]

#: Items in a page when ``limit`` is not given.
DEFAULT_LIMIT = 20
#: Most items one page holds.
MAX_LIMIT = 100
#: The query parameters a list route takes, and the only ones.
PARAMETERS = ("limit", "starting_after")
#: Attribute :func:`paged` sets on a handler; ``Endpoint.paged`` reads it.
PAGED = "__svc_paged__"

#: What an object id can look like (``ids.new_id``: ``<prefix>_<26 chars>``; columns hold
#: at most 40).  Checked before any query, so a cursor never carries control characters.
_ID = re.compile(r"[A-Za-z0-9_]{1,40}")
_LIMIT = re.compile(r"[0-9]{1,3}")

Order = Literal["asc", "desc"]
T = TypeVar("T")


@attrs.frozen
class PageRequest:
    """The parsed ``limit`` and ``starting_after`` of one request."""

    limit: int = DEFAULT_LIMIT
    starting_after: str | None = None


def parse(query: Mapping[str, str]) -> PageRequest:
    """Read ``limit`` and ``starting_after``; every problem in one 422, per parameter."""
    errors: list[dict[str, str]] = []

    def one(name: str) -> str | None:
        getlist = getattr(query, "getlist", None)
        values: list[str] = getlist(name) if getlist is not None else []
        if getlist is None and name in query:
            values = [query[name]]
        if len(values) > 1:
            errors.append({"field": name, "message": "must be given once"})
            return None
        return values[0] if values else None

    limit = DEFAULT_LIMIT
    raw_limit = one("limit")
    if raw_limit is not None:
        if _LIMIT.fullmatch(raw_limit) and 1 <= int(raw_limit) <= MAX_LIMIT:
            limit = int(raw_limit)
        else:
            errors.append(
                {"field": "limit", "message": f"must be a whole number from 1 to {MAX_LIMIT}"}
            )
    cursor = one("starting_after")
    if cursor is not None and not _ID.fullmatch(cursor):
        errors.append({"field": "starting_after", "message": _CURSOR_HINT})
        cursor = None
    for name in query:
        if name not in PARAMETERS:
            errors.append(
                {"field": name, "message": "is not a known parameter (limit, starting_after)"}
            )
    if errors:
        raise _invalid(errors)
    return PageRequest(limit=limit, starting_after=cursor)


_CURSOR_HINT = "must be the id of an item of this list (the last item of the previous page)"


def _invalid(errors: list[dict[str, str]]) -> ApiError:
    summary = "; ".join(f"{e['field']} {e['message']}" for e in errors)
    return ApiError("validation_error", f"Invalid request: {summary}.", details={"errors": errors})


def paged(handler: Callable[[Any, PageRequest], T]) -> Callable[[Any], T]:
    """Make ``handler(call, page_request)`` a list route's handler ``(call)``: the query is
    parsed (422 on a bad ``limit``, cursor or unknown parameter) and the route is marked as
    a list for ``Endpoint.paged``."""

    @functools.wraps(handler)
    def run(call: Any) -> T:
        return handler(call, parse(call.query))

    setattr(run, PAGED, True)
    return run


@attrs.frozen
class Page:
    """The rows of one page, in order, and whether more follow."""

    rows: list[Row[Any]]
    has_more: bool


def page(
    conn: Connection,
    request: PageRequest,
    query: Select[Any],
    *,
    table: Table,
    scope: Sequence[ColumnElement[bool]],
    order: Order,
    where: Sequence[ColumnElement[bool]] = (),
) -> Page:
    """One page of ``query`` (a ``select`` of ``table``'s rows, joins allowed) ordered by
    ``table``'s ``(created_at, id)`` in ``order``.

    ``scope`` is what the caller may see (their owner, seller, wallet key or endpoint): the
    cursor must name a row of ``table`` within it, else 422.  ``where`` narrows the items
    shown but not the cursors accepted (a webhook endpoint deleted since the previous page
    still marks the place to go on from).
    """
    created, ident = table.c.created_at, table.c.id
    query = query.where(*scope, *where)
    if request.starting_after is not None:
        cursor = conn.execute(
            select(created, ident).where(ident == request.starting_after, *scope)
        ).first()
        if cursor is None:
            raise _invalid([{"field": "starting_after", "message": _CURSOR_HINT}])
        if order == "asc":
            after = or_(created > cursor[0], and_(created == cursor[0], ident > cursor[1]))
        else:
            after = or_(created < cursor[0], and_(created == cursor[0], ident < cursor[1]))
        query = query.where(after)
    keys = (created, ident) if order == "asc" else (created.desc(), ident.desc())
    rows = list(conn.execute(query.order_by(*keys).limit(request.limit + 1)))
    return Page(rows=rows[: request.limit], has_more=len(rows) > request.limit)

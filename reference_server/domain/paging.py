"""A page of a list: the keyset query behind every list route (``web.paging``).

The HTTP side (reading ``limit`` and ``starting_after`` from the query string, marking a
list route) is ``reference_server.web.paging``; what is left here is the query, which the
domain modules run: a keyset on ``(created_at, id)`` in the list's order, whose cursor
must name an item the caller can see.  Keyset, not offset: an item created or deleted
while a client pages never makes another one skipped or seen twice, and equal
``created_at`` values are ordered by ``id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs
from sqlalchemy import ColumnElement, Connection, Row, Select, Table, and_, or_, select

from .errors import DomainError

__all__ = ["CURSOR_HINT", "DEFAULT_LIMIT", "Order", "Page", "PageRequest", "invalid", "page"]

#: Items in a page when ``limit`` is not given.
DEFAULT_LIMIT = 20
#: What is wrong with a ``starting_after`` that names no item of the list.
CURSOR_HINT = "must be the id of an item of this list (the last item of the previous page)"

Order = Literal["asc", "desc"]


@attrs.frozen
class PageRequest:
    """The parsed ``limit`` and ``starting_after`` of one request, and the values of the
    list's own filters that were given (``web.paging.Filter``)."""

    limit: int = DEFAULT_LIMIT
    starting_after: str | None = None
    filters: tuple[tuple[str, str], ...] = ()

    def filter(self, name: str) -> str | None:
        """The value given for the filter ``name``, or ``None``."""
        return dict(self.filters).get(name)


def invalid(errors: list[dict[str, str]]) -> DomainError:
    """The one 422 for bad paging parameters: every problem, per parameter."""
    summary = "; ".join(f"{e['field']} {e['message']}" for e in errors)
    return DomainError(
        "validation_error", f"Invalid request: {summary}.", details={"errors": errors}
    )


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
            raise invalid([{"field": "starting_after", "message": CURSOR_HINT}])
        # The plain bound on ``created_at`` says nothing the ``or_`` does not, but it is
        # what lets both databases seek the ``(scope, created_at)`` index to the cursor
        # instead of filtering every row in front of it.
        if order == "asc":
            bound = created >= cursor[0]
            after = or_(created > cursor[0], and_(created == cursor[0], ident > cursor[1]))
        else:
            bound = created <= cursor[0]
            after = or_(created < cursor[0], and_(created == cursor[0], ident < cursor[1]))
        query = query.where(bound, after)
    keys = (created, ident) if order == "asc" else (created.desc(), ident.desc())
    rows = list(conn.execute(query.order_by(*keys).limit(request.limit + 1)))
    return Page(rows=rows[: request.limit], has_more=len(rows) > request.limit)

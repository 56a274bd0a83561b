"""The HTTP side of the one paging contract every list route follows (docs/api.md,
"Lists"); the keyset query is the domain's (``reference_server.domain.paging``, re-exported
here).

A list route is a handler decorated with :func:`paged`, which parses ``limit``,
``starting_after`` and the list's own filters (every problem in one 422, before the
database is asked: a cursor is checked against the shape of an id first, so NUL bytes or
garbage never reach a query) and marks the route, so ``Endpoint.paged`` is true.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

import attrs

from ..domain.paging import (
    CURSOR_HINT,
    DEFAULT_LIMIT,
    Order,
    Page,
    PageRequest,
    invalid,
    page,
)

__all__ = [
    "DEFAULT_LIMIT",
    "FILTERS",
    "MAX_LIMIT",
    "PAGED",
    "PARAMETERS",
    "Filter",
    "Order",
    "Page",
    "PageRequest",
    "page",
    "paged",
    "parse",
]

#: Most items one page holds.
MAX_LIMIT = 100
#: The query parameters a list route takes, and the only ones.
PARAMETERS = ("limit", "starting_after")
#: Attribute :func:`paged` sets on a handler; ``Endpoint.paged`` reads it.
PAGED = "__svc_paged__"
#: Attribute :func:`paged` sets to the route's filters; ``Endpoint.filters`` reads it.
FILTERS = "__svc_filters__"

#: What an object id can look like (``ids.new_id``: ``<prefix>_<26 chars>``; columns hold
#: at most 40).  Checked before any query, so a cursor never carries control characters.
_ID = re.compile(r"[A-Za-z0-9_]{1,40}")
_LIMIT = re.compile(r"[0-9]{1,3}")

T = TypeVar("T")


@attrs.frozen
class Filter:
    """A query parameter a list takes beside ``limit`` and ``starting_after``: one of
    ``choices``, or a string matching ``pattern`` (``hint`` says what it wants), at most
    ``max_length`` characters, not empty and never a control character."""

    name: str
    description: str
    hint: str
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    max_length: int = 200

    def check(self, value: str) -> str | None:
        """What is wrong with ``value``, or ``None``."""
        if self.choices:
            return None if value in self.choices else f"must be one of {', '.join(self.choices)}"
        if (
            not value
            or len(value) > self.max_length
            or not value.isprintable()
            or (self.pattern is not None and not re.fullmatch(self.pattern, value))
        ):
            return f"must be {self.hint}"
        return None


def parse(query: Mapping[str, str], filters: Sequence[Filter] = ()) -> PageRequest:
    """Read ``limit``, ``starting_after`` and the list's ``filters``; every problem in one
    422, per parameter."""
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
        errors.append({"field": "starting_after", "message": CURSOR_HINT})
        cursor = None
    given = _filters(filters, one, errors)
    known = (*PARAMETERS, *(spec.name for spec in filters))
    for name in query:
        if name not in known:
            errors.append(
                {"field": name, "message": f"is not a known parameter ({', '.join(known)})"}
            )
    if errors:
        raise invalid(errors)
    return PageRequest(limit=limit, starting_after=cursor, filters=given)


def _filters(
    filters: Sequence[Filter],
    one: Callable[[str], str | None],
    errors: list[dict[str, str]],
) -> tuple[tuple[str, str], ...]:
    """The filters given, checked (problems added to ``errors``)."""
    given: list[tuple[str, str]] = []
    for spec in filters:
        value = one(spec.name)
        if value is None:
            continue
        problem = spec.check(value)
        if problem is not None:
            errors.append({"field": spec.name, "message": problem})
        else:
            given.append((spec.name, value))
    return tuple(given)


Handler = Callable[[Any, PageRequest], T]


@overload
def paged(handler: Handler[T], /) -> Callable[[Any], T]: ...
@overload
def paged(*, filters: Sequence[Filter]) -> Callable[[Handler[T]], Callable[[Any], T]]: ...
def paged(
    handler: Handler[T] | None = None, /, *, filters: Sequence[Filter] = ()
) -> Callable[[Any], T] | Callable[[Handler[T]], Callable[[Any], T]]:
    """Make ``handler(call, page_request)`` a list route's handler ``(call)``: the query is
    parsed (422 on a bad ``limit``, cursor, filter or unknown parameter) and the route is
    marked as a list for ``Endpoint.paged``.  ``@paged`` bare, or ``@paged(filters=...)``
    for a list with filters of its own."""
    specs = tuple(filters)

    def wrap(handler: Handler[T]) -> Callable[[Any], T]:
        @functools.wraps(handler)
        def run(call: Any) -> T:
            return handler(call, parse(call.query, specs))

        setattr(run, PAGED, True)
        setattr(run, FILTERS, specs)
        return run

    return wrap if handler is None else wrap(handler)

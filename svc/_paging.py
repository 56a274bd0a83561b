"""Auto-paging: every item of a list, one page per request, following ``starting_after``.

    for resource in client.resources.list_all():             # sync
    async for resource in client.resources.list_all():       # async

Every list of the service pages the same way (``limit`` and ``starting_after`` in,
``has_more`` out; docs/api.md), so one :class:`Pager` decides where the next page starts
for every list, and the sync and async iterators below only fetch what it asks for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["ListPage", "Pager", "aiterate", "iterate"]


class _Item(Protocol):
    @property
    def id(self) -> str: ...


ItemT = TypeVar("ItemT", bound=_Item)


class ListPage(Protocol[ItemT]):
    """What every list answers (``SellerList``, ``ResourceList``...)."""

    @property
    def data(self) -> list[ItemT]: ...

    @property
    def has_more(self) -> bool: ...


class Pager(Generic[ItemT]):
    """Where one walk through a list stands: no ItemT/O, shared by both iterators."""

    def __init__(self) -> None:
        #: The id to send as ``starting_after`` (``None``: the first page).
        self.after: str | None = None
        self.done = False

    def take(self, page: ListPage[ItemT]) -> list[ItemT]:
        """Record a fetched page and return its items."""
        items = list(page.data)
        if not page.has_more or not items:
            self.done = True  # an empty page that claims more would otherwise loop forever
        else:
            self.after = items[-1].id
        return items


def iterate(fetch: Callable[[str | None], ListPage[ItemT]]) -> Iterator[ItemT]:
    """Every item; ``fetch(starting_after)`` is called lazily, as iteration reaches a page."""
    pager: Pager[ItemT] = Pager()
    while not pager.done:
        yield from pager.take(fetch(pager.after))


async def aiterate(
    fetch: Callable[[str | None], Awaitable[ListPage[ItemT]]],
) -> AsyncIterator[ItemT]:
    """The async twin of :func:`iterate`."""
    pager: Pager[ItemT] = Pager()
    while not pager.done:
        for item in pager.take(await fetch(pager.after)):
            yield item

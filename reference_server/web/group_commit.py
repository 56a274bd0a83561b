"""Group commit: concurrent writes of one caller to one route share one transaction.

``POST /pay`` of one wallet key runs one payment at a time whatever happens: every payment
takes the key's row lock (and, on SQLite, the database's write lock) from its policy check
to its commit.  Run one transaction per request, 32 concurrent payments of one key are 32
worker threads, 32 pooled connections and 32 transactions queued on that lock, each paying
for its own BEGIN, COMMIT and wake-up.  Grouped, the requests that arrive while a group is
in its transaction wait here, on the event loop (no thread, no connection, no lock), and
run next as one group: one worker thread, one connection, one transaction, one commit.
Each request still runs its own whole pipeline in that transaction, one after the other,
so its policy and balance are decided as if it ran alone, right after the one before.

:class:`GroupCommit` only gathers and hands out: ``run`` (a blocking function, run in a
worker thread) takes the group's items and returns one :class:`Outcome` per item, in
order; what runs in the transaction and what happens when one of them fails is the
caller's (``endpoint._run_group``).  The first request of a group leads it: it takes every
request queued by then, runs them, hands each its outcome, and passes the lead to the
first request that queued meanwhile, so no request waits for more than the group before
its own and its own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread
import attrs

from ..invariant import InvariantError

__all__ = ["GroupCommit", "Outcome"]

Item = TypeVar("Item")


@attrs.frozen
class Outcome:
    """What one request of a group came to: its value, or the exception to raise."""

    value: Any = None
    error: BaseException | None = None

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@attrs.define(eq=False)
class _Waiter(Generic[Item]):
    item: Item
    woken: anyio.Event = attrs.Factory(anyio.Event)
    #: Set with the group's outcomes; ``None`` when woken to lead the next group.
    outcome: Outcome | None = None


@attrs.define(eq=False)
class _Group(Generic[Item]):
    waiting: list[_Waiter[Item]] = attrs.Factory(list)
    running: bool = False


class GroupCommit(Generic[Item]):
    """Requests of one key (a caller) that arrive while that key's group runs wait here
    and run together next.  Lives on the event loop: only ``run`` goes to a thread."""

    def __init__(self, run: Callable[[list[Item]], list[Outcome]], *, max_group: int = 32) -> None:
        if max_group < 1:
            raise InvariantError("a group holds at least one request")
        self._run = run
        self._max_group = max_group
        self._groups: dict[Hashable, _Group[Item]] = {}

    async def submit(self, key: Hashable, item: Item) -> Any:
        """Run ``item`` in the next group of ``key``; its outcome's value (or raise).

        Shielded from cancellation: a request in a group is run with it, and a lead once
        taken is passed on, or the requests queued behind it would wait forever."""
        with anyio.CancelScope(shield=True):
            group = self._groups.setdefault(key, _Group())
            waiter: _Waiter[Item] = _Waiter(item)
            group.waiting.append(waiter)
            if group.running:
                await waiter.woken.wait()
                if waiter.outcome is not None:
                    return waiter.outcome.get()
            group.running = True  # this request leads the next group
            await self._lead(key, group)
            if waiter.outcome is None:
                raise InvariantError("a group's leader runs in its own group")
            return waiter.outcome.get()

    async def _lead(self, key: Hashable, group: _Group[Item]) -> None:
        batch = group.waiting[: self._max_group]
        del group.waiting[: len(batch)]
        outcomes: list[Outcome] = []
        try:
            outcomes = await anyio.to_thread.run_sync(self._run, [w.item for w in batch])
        except Exception as exc:  # handed to every request of the group
            outcomes = [Outcome(error=exc)] * len(batch)
        finally:
            if len(outcomes) != len(batch):
                failed = InvariantError("a group's run answers each of its requests")
                outcomes = [Outcome(error=failed)] * len(batch)
            for waiter, outcome in zip(batch, outcomes, strict=True):
                waiter.outcome = outcome
                waiter.woken.set()
            if group.waiting:
                group.waiting[0].woken.set()  # woken without an outcome: it leads next
            else:
                group.running = False
                del self._groups[key]

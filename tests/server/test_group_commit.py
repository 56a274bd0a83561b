"""``web.group_commit``: requests of one key that arrive while its group runs run
together next, each gets its own outcome, and the lead passes on (no database here: the
payments' side is ``tests/money/test_group_commit.py``)."""

from __future__ import annotations

import threading

import anyio
import pytest

from reference_server.web.endpoint import Endpoint, Grouped, routes_for
from reference_server.web.group_commit import GroupCommit, Outcome
from reference_server.web.responses import Reply


@pytest.mark.anyio
async def test_requests_queued_meanwhile_run_as_the_next_group() -> None:
    release = threading.Event()
    groups: list[list[str]] = []

    def run(items: list[str]) -> list[Outcome]:
        groups.append(items)
        if items == ["a0"]:
            release.wait(10)  # the first group holds while the others queue
        return [
            Outcome(error=ValueError(item)) if item == "a2" else Outcome(item.upper())
            for item in items
        ]

    commit: GroupCommit[str] = GroupCommit(run, max_group=3)
    answers: dict[str, object] = {}

    async def submit(key: str, item: str) -> None:
        try:
            answers[item] = await commit.submit(key, item)
        except ValueError as exc:
            answers[item] = f"raised {exc}"

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "a", "a0")
        await anyio.sleep(0.1)
        for i in range(1, 6):
            tg.start_soon(submit, "a", f"a{i}")
            await anyio.sleep(0.01)
        tg.start_soon(submit, "b", "b0")  # another key: a group of its own, at once
        await anyio.sleep(0.2)
        assert groups == [["a0"], ["b0"]]
        release.set()
    # At most max_group at once; each request its own outcome (a2's failure is its own).
    assert groups == [["a0"], ["b0"], ["a1", "a2", "a3"], ["a4", "a5"]]
    assert answers == {
        "a0": "A0",
        "a1": "A1",
        "a2": "raised a2",
        "a3": "A3",
        "a4": "A4",
        "a5": "A5",
        "b0": "B0",
    }
    assert commit._groups == {}  # nothing left behind once every group ran


@pytest.mark.anyio
async def test_a_group_whose_run_fails_fails_each_request_and_passes_the_lead() -> None:
    calls: list[list[int]] = []

    def run(items: list[int]) -> list[Outcome]:
        calls.append(items)
        if items == [1]:
            raise RuntimeError("the group's thread failed")
        return [Outcome(i) for i in items]

    commit: GroupCommit[int] = GroupCommit(run)
    with pytest.raises(RuntimeError):
        await commit.submit("k", 1)
    assert await commit.submit("k", 2) == 2


def test_group_commit_needs_a_sync_write_route_with_a_required_key() -> None:
    def handler(call: object) -> Reply:
        return Reply({})

    with pytest.raises(Exception, match="group commit needs"):
        routes_for([Endpoint(method="POST", path="/x", handler=handler, run=Grouped())])
    routes_for(
        [Endpoint(method="POST", path="/x", handler=handler, run=Grouped(), idempotency="required")]
    )

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..support import LiveServer
from .receiver import Receiver, start_receiver

#: Fast schedules so retries happen within a test.
FAST = {
    "worker_poll_seconds": 0.05,
    "webhook_retry_schedule": (0.2, 0.2, 0.2, 0.2),
    "webhook_retry_jitter": 0.0,
    "worker_lease_seconds": 5.0,
}


@pytest.fixture
def make_receiver() -> Iterator[Callable[[], Receiver]]:
    started: list[Receiver] = []

    def make() -> Receiver:
        r = start_receiver()
        started.append(r)
        return r

    yield make
    for r in started:
        r.server.shutdown()


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(**FAST)


def fast(**overrides: Any) -> dict[str, Any]:
    return {**FAST, **overrides}

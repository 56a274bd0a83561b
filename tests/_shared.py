"""Helpers the test packages share beside ``support``: waiting on what runs in the
background (a worker, a webhook, a processor's event) by polling for it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T], what: str = "not reached in time", *, seconds: float = 20.0) -> T:
    """Call ``check`` every 50 ms until it returns something truthy, and return that;
    fail with ``what`` once ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return value

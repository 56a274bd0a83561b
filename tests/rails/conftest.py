from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..gate.support import LiveApp, serve


@pytest.fixture
def serve_app() -> Iterator[Callable[..., LiveApp]]:
    """Serve ASGI apps (sellers' apps) on loopback for one test; all stopped afterwards."""
    started: list[LiveApp] = []

    def start(app: Any, **kwargs: Any) -> LiveApp:
        live = serve(app, **kwargs)
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()

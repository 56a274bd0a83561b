"""Fixtures of the approval tests: a paid x402 URL on loopback that counts what it was
paid, an agent whose policy sends it to a person, and fast webhook delivery."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from ..payurl.conftest import facilitator, pay_to  # noqa: F401  (fixtures)
from ..sandbox.helpers import assert_chain_sound, serve
from ..support import LiveServer
from ..webhooks.conftest import FAST
from .helpers import PaidCounter, paid_app


@pytest.fixture
def server(make_server: Callable[..., LiveServer]) -> LiveServer:
    return make_server(**FAST)


@pytest.fixture
def seller(facilitator: str, pay_to: str) -> Iterator[PaidCounter]:  # noqa: F811
    """An x402 seller (0.25 per request) that counts the paid requests reaching it."""
    counter = PaidCounter(paid_app(facilitator, pay_to))
    with serve(counter) as url:
        counter.url = url + "/paid"
        yield counter


@pytest.fixture(autouse=True)
def _chain_stays_sound(server: LiveServer) -> Iterator[None]:
    yield
    assert_chain_sound(server.ctx.db)

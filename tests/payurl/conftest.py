"""Fixtures of the pay-url tests: a funded agent, the hot wallet, sellers on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from ..sandbox.helpers import assert_chain_sound, new_account, serve
from ..support import LiveServer
from .apps import mpp_gated_app, x402_gated_app
from .helpers import Agent, make_agent


@pytest.fixture
def agent(server: LiveServer) -> Agent:
    """A wallet key in test funded with 10.00, no limits."""
    return make_agent(server)


@pytest.fixture
def pay_to() -> str:
    return str(new_account().address)


@pytest.fixture
def facilitator(server: LiveServer) -> str:
    return server.url + "/sandbox/x402"


@pytest.fixture
def serving() -> Callable[[Any], AbstractContextManager[str]]:
    return serve


@pytest.fixture
def x402_url(facilitator: str, pay_to: str) -> Iterator[str]:
    with serve(x402_gated_app(facilitator, pay_to)) as url:
        yield url + "/report"


@pytest.fixture
def mpp_url(facilitator: str, pay_to: str) -> Iterator[str]:
    with serve(mpp_gated_app(facilitator, pay_to)) as url:
        yield url + "/report"


@pytest.fixture(autouse=True)
def _chain_stays_sound(server: LiveServer) -> Iterator[None]:
    """After each test: the sandbox chain's books balance (cancellations included)."""
    yield
    assert_chain_sound(server.ctx.db)

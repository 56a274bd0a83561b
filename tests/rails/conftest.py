"""The open-rail tests' shared set-up: a shop and a funded payer on the test's server, and
the one parameter (each test taking ``protocol`` runs with x402's client and pympp's)."""

from __future__ import annotations

import pytest
from eth_account.signers.local import LocalAccount

from ..support import LiveServer
from .helpers import RailShop, funded_payer, open_rail_shop


@pytest.fixture(params=["x402", "mpp"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def shop(server: LiveServer) -> RailShop:
    """A seller selling one resource in test, with payments enabled."""
    return open_rail_shop(server)


@pytest.fixture
def payer(server: LiveServer) -> LocalAccount:
    """A fresh account holding $1 on the sandbox chain."""
    return funded_payer(server)

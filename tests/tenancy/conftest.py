"""The tenancy tests run on one shared, populated world per run (:mod:`.world`), not on
a fresh database: ``server`` here is the world's server, and each test makes the new
owners and sellers it needs beside everybody else's rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import delete

from reference_server import Settings
from reference_server.store import tables as t

from ..conftest import fresh_database
from ..sandbox.helpers import new_account
from ..support import TEST_SETTINGS, LiveServer, start_server
from .world import World, build, live_settings, stop


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with (
        fresh_database(tmp_path_factory.mktemp("chain")) as chain_url,
        fresh_database(tmp_path_factory.mktemp("world")) as url,
    ):
        chain = start_server(Settings(**{**TEST_SETTINGS, "database_url": chain_url}))
        hot_wallet = new_account()
        settings = {**TEST_SETTINGS, "database_url": url, **live_settings(chain, hot_wallet)}
        world = build(start_server(Settings(**settings)), chain, hot_wallet)
        yield world
        stop(world, chain)


@pytest.fixture
def server(world: World) -> LiveServer:
    return world.server


@pytest.fixture(autouse=True)
def _loopback_origins_released(world: World) -> Iterator[None]:
    """A test's apps listen on loopback ports the next test may get again, for another
    account: the operator's release of an origin, done after each test."""
    yield
    g = t.gate_origins
    with world.server.ctx.db.write() as conn:
        conn.execute(delete(g).where(g.c.origin.like("http://127.0.0.1:%")))

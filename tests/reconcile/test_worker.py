"""The worker reconciles on its own every ``reconcile_interval_seconds``: each run is
recorded (what ``--history`` lists), drift is logged at WARNING, and a chain it cannot read
is recorded as the run's error rather than stopping the worker."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from eth_account import Account

from reference_server.commands import main
from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS

from ..rails.helpers import fund
from ..support import LiveServer, free_port, until
from .helpers import history


def test_the_worker_records_runs_and_logs_drift(
    make_server: Callable[..., LiveServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reference_server.reconcile")
    dead_node = f"http://127.0.0.1:{free_port()}"
    server = make_server(
        reconcile_interval_seconds=0.2,
        live_rpc_url=dead_node,
        live_deposit_address=Account.create().address,
    )
    fund(server.url, TEST_DEPOSIT_ADDRESS, "0.75")

    def drift_recorded() -> bool:
        runs = history(server)
        return any(r["environment"] == "test" and r["drift_count"] for r in runs) and any(
            r["environment"] == "live" for r in runs
        )

    until(drift_recorded, "the worker did not reconcile in time")
    runs = history(server)
    test_run = next(r for r in runs if r["environment"] == "test" and r["drift_count"])
    [unbooked] = [f for f in test_run["findings"] if f["kind"] == "unbooked_in"]
    assert (unbooked["chain_micros"], unbooked["address"]) == (750_000, TEST_DEPOSIT_ADDRESS)
    live_run = next(r for r in runs if r["environment"] == "live")
    assert live_run["error"] and live_run["to_block"] is None
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("drift unbooked_in on deposits" in line for line in logged)
    assert any("of live could not run" in line for line in logged)

    table = CliRunner().invoke(
        main, ["reconcile", "--history", "--database-url", server.settings.database_url]
    )
    assert table.exit_code == 0 and test_run["id"] in table.output


def test_live_without_a_node_is_a_clear_refusal(server: LiveServer) -> None:
    url = server.settings.database_url
    got = CliRunner().invoke(
        main, ["reconcile", "--environment", "live", "--database-url", url], env={}
    )
    assert got.exit_code == 1
    assert "SVC_LIVE_RPC_URL" in got.output and "Traceback" not in got.output

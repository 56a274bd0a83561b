"""Running ``svc-server reconcile`` against a test server's database, as an operator would."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from click.testing import CliRunner

from reference_server.commands import main
from reference_server.settings import env_variable

from ..support import LiveServer


@attrs.frozen
class Outcome:
    exit_code: int
    output: str
    body: dict[str, Any]

    @property
    def findings(self) -> list[dict[str, Any]]:
        return [f for run in self.body.get("runs", []) for f in run["findings"]]

    @property
    def drift(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["drift"]]

    def total(self, account: str) -> tuple[int | None, int | None]:
        [row] = [f for f in self.findings if f["kind"] == "total" and f["account"] == account]
        return row["ledger_micros"], row["chain_micros"]


def reconcile(
    live: LiveServer, environment: str, settings: Mapping[str, Any] | None = None
) -> Outcome:
    """The command's JSON and exit status, then its table (a second run, recorded too),
    with the server's ``settings`` in the environment, as an operator's shell has them."""
    env = {env_variable(name): str(value) for name, value in (settings or {}).items()}
    args = ["reconcile", "--environment", environment, "--database-url"]
    args.append(live.settings.database_url)
    runner = CliRunner()
    as_json = runner.invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
    table = runner.invoke(main, args, env=env, catch_exceptions=False)
    assert as_json.exit_code in (0, 1) and as_json.stdout, as_json.output
    assert table.exit_code == as_json.exit_code, table.output
    return Outcome(as_json.exit_code, table.output, json.loads(as_json.stdout))


def history(live: LiveServer) -> list[dict[str, Any]]:
    url = live.settings.database_url
    got = CliRunner().invoke(main, ["reconcile", "--history", "--json", "--database-url", url])
    assert got.exit_code == 0, got.output
    runs: list[dict[str, Any]] = json.loads(got.stdout)["runs"]
    return runs

"""``svc pay-url URL`` from the shell: the paid answer as JSON, or the error and exit 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from svc.cli import _build

from ..support import LiveServer
from .helpers import Agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_pay_url_prints_the_unlocked_answer(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", x402_url]
    result = CliRunner().invoke(_build(), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    paid = json.loads(result.output)
    assert paid["rail"] == "x402" and paid["body"] == '{"report":"the goods"}'
    assert paid["tx_hash"].startswith("0x")


def test_pay_url_errors_exit_1(server: LiveServer, agent: Agent) -> None:
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", "ftp://x/y"]
    result = CliRunner().invoke(_build(), args, catch_exceptions=False)
    assert result.exit_code == 1 and "422 validation_error" in result.output
    bad = ["--base-url", server.url, "pay-url", "https://x.example", "--json", "{nope"]
    result = CliRunner().invoke(_build(), [*bad, "--method", "POST"])
    assert result.exit_code == 2 and "not JSON" in result.output


def test_pay_url_stream_writes_the_body_to_stdout_and_the_result_to_stderr(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", x402_url]
    result = CliRunner().invoke(_build(), [*args, "--stream"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == '{"report":"the goods"}'
    paid = json.loads(result.stderr)
    assert paid["rail"] == "x402" and paid["body"] == "" and paid["tx_hash"].startswith("0x")

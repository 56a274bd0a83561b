"""``svc pay-url URL --wait-approval``: the approval_url printed, progress while a person
decides, then the same request repeated with the same key, and paid once."""

from __future__ import annotations

import json
import threading
import time

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from reference_server.store import tables as t
from svc.cli import _build

from ..payurl.helpers import make_agent
from ..support import LiveServer
from .helpers import PaidCounter, decide

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _approve_when_asked(server: LiveServer, key_id: str, links: list[str]) -> None:
    """A person: waits for the key's approval, opens its link and approves."""
    for _ in range(200):
        with server.ctx.db.read() as conn:
            found = conn.execute(
                select(t.approvals.c.id).where(t.approvals.c.wallet_key_id == key_id)
            ).first()
        if found is not None and links:
            decide(links[0], "approve")
            return
        time.sleep(0.05)


def test_wait_approval_polls_then_pays_once(server: LiveServer, seller: PaidCounter) -> None:
    agent = make_agent(server, approval_above="0.10")
    links: list[str] = []
    runner = CliRunner()
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", seller.url]

    # The person learns the link from the agent's output: read it off the approval.
    def person() -> None:
        for _ in range(200):
            listed = agent.client.spend.approvals().data
            if listed and listed[0].approval_url:
                links.append(listed[0].approval_url)
                break
            time.sleep(0.05)
        _approve_when_asked(server, agent.wallet_key_id, links)

    helper = threading.Thread(target=person)
    helper.start()
    result = runner.invoke(_build(), [*args, "--wait-approval"], catch_exceptions=False)
    helper.join()
    assert result.exit_code == 0, result.output
    assert f"approval required: open {links[0]}" in result.stderr
    assert "approval approved" in result.stderr
    paid = json.loads(result.stdout)
    assert paid["amount"] == "0.25" and seller.paid == 1


def test_without_wait_the_link_is_shown_and_nothing_paid(
    server: LiveServer, seller: PaidCounter
) -> None:
    agent = make_agent(server, approval_above="0.10")
    args = ["--base-url", server.url, "--wallet-key", agent.wallet_key, "pay-url", seller.url]
    result = CliRunner().invoke(_build(), args, catch_exceptions=False)
    assert result.exit_code == 1 and "/approvals/" in result.output and seller.paid == 0

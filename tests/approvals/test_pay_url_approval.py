"""A pay-url over the wallet key's approval line waits for a person: nothing is paid, the
amount is held against the policy and the balance, and the repeat with the same
``Idempotency-Key`` pays once when approved, or answers 402 when declined or expired."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import select

import svc
from reference_server.domain import approvals
from reference_server.store import tables as t
from reference_server.web.access_log import ACCESS_LOGGER
from svc import webhooks

from ..payurl.helpers import Agent, make_agent
from ..support import LiveServer
from ..webhooks.receiver import Receiver
from .helpers import PRICE, SAME_ORIGIN, PaidCounter, approval_row, decide, pay_url

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def agent_over_the_line(server: LiveServer, **policy: object) -> Agent:
    return make_agent(server, approval_above="0.10", **policy)


def test_approved_pays_once_on_the_repeat(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server, allowance="1.00", period="day")
    r = pay_url(server, agent.wallet_key, seller.url, "k1")
    assert r.status_code == 202, r.text
    asked = r.json()
    assert (asked["object"], asked["status"], asked["code"]) == (
        "approval",
        "pending",
        "approval_required",
    )
    assert asked["amount"] == "0.25" and asked["currency"] == "USD"
    assert asked["url"] == seller.url and asked["method"] == "GET"
    assert asked["wallet_key_id"] == agent.wallet_key_id
    assert asked["approval_url"].startswith(server.url + "/approvals/")
    assert asked["id"].startswith("appr_") and asked["expires_at"] > asked["created_at"]
    assert r.headers["cache-control"] == "no-store"
    assert seller.paid == 0
    # held: the balance and the allowance show it; nothing moved yet
    held = agent.spend()
    assert held.balance == Decimal("9.75") and held.remaining_allowance == Decimal("0.75")

    again = pay_url(server, agent.wallet_key, seller.url, "k1")
    assert again.status_code == 202 and again.json()["id"] == asked["id"]
    assert again.json()["approval_url"] == asked["approval_url"]

    assert decide(asked["approval_url"], "approve").status_code == 200
    paid = pay_url(server, agent.wallet_key, seller.url, "k1")
    assert paid.status_code == 200, paid.text
    assert paid.json()["amount"] == "0.25" and seller.paid == 1
    after = agent.spend()
    assert after.balance == Decimal("9.75") and after.spent_total == PRICE
    assert after.remaining_allowance == Decimal("0.75")
    row = approval_row(server, asked["id"])
    assert row.status == "used" and row.transfer_id is None

    replay = pay_url(server, agent.wallet_key, seller.url, "k1")
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["receipt_id"] == paid.json()["receipt_id"] and seller.paid == 1
    assert agent.spend().balance == Decimal("9.75")
    got = agent.client.spend.approval(asked["id"])
    assert got.status == "used" and got.approval_url is None


def test_declined_releases_the_hold_and_stays_declined(
    server: LiveServer, seller: PaidCounter
) -> None:
    agent = agent_over_the_line(server, budget="5.00")
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    assert agent.spend().remaining_budget == Decimal("4.75")
    assert decide(asked["approval_url"], "decline").status_code == 200
    for _ in range(2):
        r = pay_url(server, agent.wallet_key, seller.url, "k")
        assert r.status_code == 402 and r.json()["error"]["code"] == "approval_declined"
    back = agent.spend()
    assert back.balance == Decimal("10.00") and back.remaining_budget == Decimal("5.00")
    assert back.spent_total == 0 and seller.paid == 0
    second = httpx.get(asked["approval_url"])
    assert second.status_code == 200 and "already decided" in second.text.lower()


def test_expired_by_the_sweep(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server, approval_ttl_seconds=60)
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    assert approvals.expire_due(server.ctx.db, now=server.ctx.now()) == 0
    later = server.ctx.now() + timedelta(seconds=61)
    assert approvals.expire_due(server.ctx.db, now=later) == 1
    assert agent.spend().balance == Decimal("10.00")
    r = pay_url(server, agent.wallet_key, seller.url, "k")
    assert r.status_code == 402 and r.json()["error"]["code"] == "approval_expired"
    assert httpx.get(asked["approval_url"]).status_code == 200  # says: decided (expired)
    assert seller.paid == 0


def test_an_approved_one_not_resumed_expires(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server, approval_ttl_seconds=60)
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    decide(asked["approval_url"], "approve")
    later = server.ctx.now() + timedelta(seconds=61)
    assert approvals.expire_due(server.ctx.db, now=later) == 1
    assert agent.spend().balance == Decimal("10.00") and agent.spend().spent_total == 0
    r = pay_url(server, agent.wallet_key, seller.url, "k")
    assert r.json()["error"]["code"] == "approval_expired" and seller.paid == 0


def test_approval_hosts_always_ask(server: LiveServer, seller: PaidCounter) -> None:
    host = urlsplit(seller.url).netloc
    agent = make_agent(server, approval_hosts=[host])
    assert agent.client.spend.balance().policy.approval_hosts == [host]
    r = pay_url(server, agent.wallet_key, seller.url, "k")
    assert r.status_code == 202 and r.json()["status"] == "pending"


def test_under_the_line_pays_at_once(server: LiveServer, seller: PaidCounter) -> None:
    agent = make_agent(server, approval_above="0.25")  # strictly above: 0.25 is not
    assert pay_url(server, agent.wallet_key, seller.url, "k").status_code == 200


def test_without_a_key_nothing_is_held(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server)
    r = pay_url(server, agent.wallet_key, seller.url, None)
    assert r.status_code == 400 and r.json()["error"]["code"] == "idempotency_key_required"
    assert agent.spend().balance == Decimal("10.00") and seller.paid == 0


def test_the_key_with_another_body_is_refused(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server)
    assert pay_url(server, agent.wallet_key, seller.url, "k").status_code == 202
    r = pay_url(server, agent.wallet_key, seller.url, "k", method="POST", json={"a": 1})
    assert r.status_code == 422 and r.json()["error"]["code"] == "idempotency_key_reused"


def test_the_page_refuses_cross_site_and_stale_forms(
    server: LiveServer, seller: PaidCounter
) -> None:
    agent = agent_over_the_line(server)
    link = pay_url(server, agent.wallet_key, seller.url, "k").json()["approval_url"]
    page = httpx.get(link)
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["content-type"].startswith("text/html")
    assert "<script" not in page.text and "agent" in page.text and "0.25" in page.text
    refused = decide(link, "approve", **{"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    forged = httpx.post(link, data={"csrf": "0" * 64, "decision": "approve"}, headers=SAME_ORIGIN)
    assert forged.status_code == 403
    assert approval_row(server, link_id(server, agent)).status == "pending"
    assert httpx.get(server.url + "/approvals/" + "f" * 64).status_code == 404


def link_id(server: LiveServer, agent: Agent) -> str:
    with server.ctx.db.read() as conn:
        return str(
            conn.execute(
                select(t.approvals.c.id).where(t.approvals.c.wallet_key_id == agent.wallet_key_id)
            ).scalar_one()
        )


def test_the_token_is_stored_hashed_only(
    server: LiveServer, seller: PaidCounter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger=ACCESS_LOGGER)
    access_log = logging.getLogger(ACCESS_LOGGER)
    access_log.addHandler(caplog.handler)  # uvicorn's logger does not propagate
    try:
        agent = agent_over_the_line(server)
        link = pay_url(server, agent.wallet_key, seller.url, "k").json()["approval_url"]
        decide(link, "approve")
    finally:
        access_log.removeHandler(caplog.handler)
    token = link.rsplit("/", 1)[1]
    with server.ctx.db.read() as conn:
        for table in t.metadata.sorted_tables:
            for row in conn.execute(select(table)):
                assert token not in repr(tuple(row)), table.name
    access = [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]
    assert any("/approvals/{token}" in line for line in access), access
    assert not any(token in line for line in access)


def test_concurrent_spends_never_pass_the_held_allowance(
    server: LiveServer, seller: PaidCounter, facilitator: str, pay_to: str
) -> None:
    from ..sandbox.helpers import serve
    from .helpers import paid_app

    host = urlsplit(seller.url).netloc
    agent = make_agent(server, allowance="1.00", period="day", approval_hosts=[host])
    assert pay_url(server, agent.wallet_key, seller.url, "held").status_code == 202
    with serve(paid_app(facilitator, pay_to)) as other:
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(
                pool.map(
                    lambda i: pay_url(server, agent.wallet_key, other + "/paid", f"c{i}"),
                    range(6),
                )
            )
    codes = sorted(a.status_code for a in answers)
    assert codes.count(200) == 3, [a.text for a in answers]  # 0.75 left beside the hold
    assert all(
        a.json()["error"]["code"] == "allowance_exceeded" for a in answers if a.status_code != 200
    )
    spend = agent.spend()
    assert spend.spent_this_period == Decimal("1.00") and spend.remaining_allowance == 0


def test_events_reach_the_owners_webhook(
    server: LiveServer, seller: PaidCounter, receiver: Receiver
) -> None:
    agent = agent_over_the_line(server)
    owner = svc.Client(
        base_url=server.url, owner_jwt=owner_jwt(server, agent), environment="test", max_retries=0
    )
    hook = owner.webhooks.create(receiver.url, events=["approval.requested", "approval.decided"])
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    decide(asked["approval_url"], "decline")
    got = [webhooks.verify(hook.signing_secret, g.body, g.headers) for g in receiver.wait_for(2)]
    by_type = {e.type: e.data for e in got}
    requested = by_type["approval.requested"]
    assert requested.approval_id == asked["id"] and requested.amount == PRICE
    assert requested.url == seller.url  # the link: GET /spend/approvals/{id} (owner)
    assert owner.spend.approval(asked["id"]).status == "declined"
    assert by_type["approval.decided"].decision == "declined"


def owner_jwt(server: LiveServer, agent: Agent) -> str:
    from reference_server.web.auth import issue_owner_jwt

    return issue_owner_jwt(agent.owner_id, server.ctx.jwt_secret, server.ctx.now(), 3600)


def test_only_the_key_and_its_owner_read_it(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server)
    stranger = make_agent(server)
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    assert agent.client.spend.approval(asked["id"]).status == "pending"
    assert [a.id for a in agent.client.spend.approvals().data] == [asked["id"]]
    with pytest.raises(svc.NotFoundError):
        stranger.client.spend.approval(asked["id"])
    assert stranger.client.spend.approvals().data == []
    mine = svc.Client(
        base_url=server.url, owner_jwt=owner_jwt(server, agent), environment="test", max_retries=0
    )
    assert mine.spend.approval(asked["id"]).amount == PRICE
    other = svc.Client(
        base_url=server.url,
        owner_jwt=owner_jwt(server, stranger),
        environment="test",
        max_retries=0,
    )
    with pytest.raises(svc.NotFoundError):
        other.spend.approval(asked["id"])


def test_the_sdk_raises_approval_required(server: LiveServer, seller: PaidCounter) -> None:
    agent = agent_over_the_line(server)
    opts = svc.RequestOptions(idempotency_key="sdk-1")
    with pytest.raises(svc.ApprovalRequired) as raised:
        agent.client.spend.pay_url(seller.url, options=opts)
    approval = raised.value.approval
    assert approval.status == "pending" and approval.approval_url
    assert isinstance(raised.value, svc.SvcError) and raised.value.request_id
    polls: list[str] = []
    with pytest.raises(svc.ApprovalRequired):  # still pending past the deadline
        agent.client.wait_for_approval(approval.id, timeout=0.3, poll=0.1, on_poll=polls.append)
    assert polls and polls[0].status == "pending"
    timer = threading.Timer(0.3, decide, (approval.approval_url, "approve"))
    timer.start()
    decided = agent.client.wait_for_approval(approval.id, timeout=20, poll=0.1)
    timer.join()
    assert decided.status == "approved"
    assert agent.client.spend.pay_url(seller.url, options=opts).amount == PRICE


def test_a_price_raised_after_the_approval_is_refused(
    server: LiveServer, seller: PaidCounter, facilitator: str, pay_to: str
) -> None:
    from ..payurl.apps import gated_app
    from .helpers import _goods

    agent = agent_over_the_line(server, approval_ttl_seconds=60)
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    decide(asked["approval_url"], "approve")
    seller.app = gated_app(facilitator, pay_to, _goods, price="$0.50")  # the seller's new price
    r = pay_url(server, agent.wallet_key, seller.url, "k")
    assert r.status_code == 402 and r.json()["error"]["code"] == "approval_amount_exceeded"
    assert r.json()["error"]["details"]["approved"] == "0.25" and seller.paid == 0
    assert pay_url(server, agent.wallet_key, seller.url, "k").status_code == 402  # stored
    # the approval can never pay now: its hold is given back at once, not at its expiry
    assert agent.spend().balance == Decimal("10.00") and agent.spend().spent_total == 0
    assert approval_row(server, asked["id"]).transfer_id is None
    later = server.ctx.now() + timedelta(seconds=61)
    assert approvals.expire_due(server.ctx.db, now=later) == 1  # approved, then expired
    assert agent.spend().balance == Decimal("10.00") and agent.spend().spent_total == 0


def test_an_approval_past_its_expiry_reads_expired_before_the_sweep(
    server: LiveServer, seller: PaidCounter
) -> None:
    agent = agent_over_the_line(server, approval_ttl_seconds=60)
    asked = pay_url(server, agent.wallet_key, seller.url, "k").json()
    url = f"{server.url}/spend/approvals/{asked['id']}"
    headers = {"Authorization": f"Bearer {agent.wallet_key}"}
    assert httpx.get(url, headers=headers).json()["status"] == "pending"
    expired_at = server.ctx.now() - timedelta(seconds=1)
    with server.ctx.db.write() as conn:
        conn.execute(
            t.approvals.update()
            .where(t.approvals.c.id == asked["id"])
            .values(expires_at=expired_at)
        )
    shown = httpx.get(url, headers=headers).json()
    assert (shown["status"], shown["approval_url"], shown["code"]) == ("expired", None, None)
    assert shown["decided_at"] is not None
    listed = httpx.get(f"{server.url}/spend/approvals", headers=headers).json()["data"]
    assert [(a["id"], a["status"]) for a in listed] == [(asked["id"], "expired")]
    assert approval_row(server, asked["id"]).status == "pending"  # the sweep has not run
    assert approvals.expire_due(server.ctx.db, now=server.ctx.now()) == 1
    assert httpx.get(url, headers=headers).json()["status"] == "expired"
    assert agent.spend().balance == Decimal("10.00") and seller.paid == 0

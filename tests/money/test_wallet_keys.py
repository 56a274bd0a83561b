"""Wallet keys: minting, policy changes, funding, refunds, revocation and period resets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

import svc
from reference_server.store import tables as t

from ..support import Account, LiveServer, new_account
from .helpers import D, events_of, market


def owner_client(live: LiveServer) -> tuple[svc.Client, str]:
    acct = new_account(live.url)
    return svc.Client(
        base_url=live.url, owner_jwt=acct.owner_jwt, environment="test", max_retries=0
    ), acct.owner_id


def test_mint_shows_the_key_once_and_stores_only_a_hash(server: LiveServer) -> None:
    owner, _ = owner_client(server)
    created = owner.wallet_keys.create(
        name="research agent",
        allowance="5",
        period="day",
        max_per_tx="1",
        budget="50",
        allowed_hosts=["api.example.com"],
        allowed_rails=["x402", "rill"],
    )
    assert created.key.startswith("svc_vw_test_") and created.balance == D("0")
    assert created.policy == svc.WalletPolicy(
        allowance=D("5"),
        max_per_tx=D("1"),
        budget=D("50"),
        period="day",
        allowed_hosts=["api.example.com"],
        allowed_rails=["x402", "rill"],
    )
    fetched = owner.wallet_keys.get(created.id)
    assert not hasattr(fetched, "key") and fetched.key_prefix == created.key[:16]
    listed = [k.id for k in owner.wallet_keys.list().data]
    assert listed[-1] == created.id and len(listed) == 2  # new_account minted the first
    with server.ctx.db.read() as conn:
        row = conn.execute(select(t.wallet_keys).where(t.wallet_keys.c.id == created.id)).one()
    assert created.key not in repr(tuple(row))


def test_update_merges_and_null_clears(server: LiveServer) -> None:
    owner, _ = owner_client(server)
    key = owner.wallet_keys.create(allowance="5", period="week", max_per_tx="1")
    updated = owner.wallet_keys.update(key.id, max_per_tx=None, budget="9", name="renamed")
    assert updated.name == "renamed"
    assert updated.policy.allowance == D("5") and updated.policy.period == "week"
    assert updated.policy.max_per_tx is None and updated.policy.budget == D("9")


def test_policy_validation(server: LiveServer, account: Account) -> None:
    headers = {"Authorization": f"Bearer {account.owner_jwt}", "X-Svc-Environment": "test"}
    r = httpx.post(
        server.url + "/wallet-keys",
        headers=headers,
        json={
            "policy": {
                "allowance": "-1",
                "period": "hour",
                "allowed_rails": ["card"],
                "allowed_hosts": "x",
                "colour": 1,
            }
        },
    )
    assert r.status_code == 422
    fields = {e["field"] for e in r.json()["error"]["details"]["errors"]}
    assert fields == {
        "policy.allowance",
        "policy.period",
        "policy.allowed_rails",
        "policy.allowed_hosts",
        "policy.colour",
    }


def test_fund_refund_revoke_and_their_events(server: LiveServer) -> None:
    owner, owner_id = owner_client(server)
    key = owner.wallet_keys.create()
    assert owner.wallet_keys.fund(key.id, "10.00").balance == D("10.00")
    assert owner.wallet_keys.refund(key.id, "2.50").balance == D("7.50")
    with pytest.raises(svc.PaymentRequiredError) as too_much:
        owner.wallet_keys.refund(key.id, "8.00")
    assert too_much.value.code == "insufficient_funds"
    revoked = owner.wallet_keys.revoke(key.id)
    assert revoked.status == "revoked" and revoked.balance == D("0")
    assert owner.wallet_keys.revoke(key.id).status == "revoked"  # repeat: no change
    with pytest.raises(svc.ConflictError):
        owner.wallet_keys.fund(key.id, "1")
    agent = svc.Client(base_url=server.url, wallet_key=key.key)
    with pytest.raises(svc.AuthenticationError) as dead:
        agent.spend.balance()
    assert "revoked" in dead.value.message

    assert [e["amount"] for e in events_of(server, owner_id, "funding.paid")] == ["10.00"]
    refunds = events_of(server, owner_id, "funding.refunded")
    assert [(e["amount"], e["reason"]) for e in refunds] == [("2.50", "refund"), ("7.50", "revoke")]
    [revoked_event] = events_of(server, owner_id, "vw.revoked")
    assert revoked_event["returned_amount"] == "7.50"


def test_live_funding_comes_from_the_account_wallet(server: LiveServer, account: Account) -> None:
    live_owner = svc.Client(base_url=server.url, owner_jwt=account.owner_jwt, environment="live")
    key = live_owner.wallet_keys.create()
    assert key.key.startswith("svc_vw_live_")
    with pytest.raises(svc.PaymentRequiredError) as empty:
        live_owner.wallet_keys.fund(key.id, "1.00")  # no sandbox money in live
    assert empty.value.code == "insufficient_funds"


def test_keys_of_other_owners_and_environments_are_invisible(server: LiveServer) -> None:
    a_account = new_account(server.url)
    a_jwt = a_account.owner_jwt
    a = svc.Client(base_url=server.url, owner_jwt=a_jwt, environment="test")
    b, _ = owner_client(server)
    key = a.wallet_keys.create()
    for call in (lambda: b.wallet_keys.get(key.id), lambda: b.wallet_keys.fund(key.id, "1")):
        with pytest.raises(svc.NotFoundError):
            call()
    live_view = svc.Client(base_url=server.url, owner_jwt=a._defaults.owner_jwt, environment="live")
    with pytest.raises(svc.NotFoundError):
        live_view.wallet_keys.get(key.id)


def test_allowance_resets_each_period_with_an_injected_clock(make_server: Any) -> None:
    now = [datetime(2026, 11, 21, 9, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**8)
    m = market(live, price="1.00", allowance="2.00", period="day")
    m.agent.pay(resource_id=m.resource.id)
    m.agent.pay(resource_id=m.resource.id)
    with pytest.raises(svc.PaymentRequiredError) as capped:
        m.agent.pay(resource_id=m.resource.id)
    assert capped.value.code == "allowance_exceeded"
    assert "2026-11-22T09:00:00+00:00" in capped.value.message  # names the reset time
    assert capped.value.details is not None
    assert capped.value.details["remaining_allowance"] == "0.00"
    state = m.agent.spend.balance()
    assert state.remaining_allowance == D("0") and state.next_reset_at == now[0] + timedelta(days=1)

    now[0] += timedelta(hours=23, minutes=59)
    with pytest.raises(svc.PaymentRequiredError):
        m.agent.pay(resource_id=m.resource.id)
    now[0] += timedelta(minutes=1)  # the boundary
    assert m.agent.spend.balance().remaining_allowance == D("2.00")
    m.agent.pay(resource_id=m.resource.id)
    state = m.agent.spend.balance()
    assert state.spent_this_period == D("1.00") and state.spent_total == D("3.00")
    assert state.period_started_at == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)

    now[0] += timedelta(days=3, hours=5)  # several idle periods: one reset, aligned
    m.agent.pay(resource_id=m.resource.id)
    assert m.agent.spend.balance().period_started_at == datetime(2026, 11, 25, 9, tzinfo=UTC)


def test_monthly_periods_follow_the_calendar(make_server: Any) -> None:
    now = [datetime(2026, 1, 31, 12, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**9)
    m = market(live, price="1.00", allowance="1.00", period="month")
    m.agent.pay(resource_id=m.resource.id)
    assert m.agent.spend.balance().next_reset_at == datetime(2026, 2, 28, 12, tzinfo=UTC)
    now[0] = datetime(2026, 2, 28, 12, 0, tzinfo=UTC)
    m.agent.pay(resource_id=m.resource.id)
    assert m.agent.spend.balance().next_reset_at == datetime(2026, 3, 31, 12, tzinfo=UTC)
    now[0] = datetime(2026, 3, 31, 11, 59, tzinfo=UTC)  # the month keeps its day: not yet
    with pytest.raises(svc.PaymentRequiredError):
        m.agent.pay(resource_id=m.resource.id)
    now[0] = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
    m.agent.pay(resource_id=m.resource.id)


def test_reset_event_is_recorded(make_server: Any) -> None:
    now = [datetime(2026, 11, 21, 9, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**8)
    acct = new_account(live.url)
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    seller = svc.Client(base_url=live.url, seller_key=acct.seller_key)
    resource = seller.resources.create(kind="http", path="/r", amount="1")
    key = owner.wallet_keys.create(allowance="1", period="week")
    owner.wallet_keys.fund(key.id, "5")
    agent = svc.Client(base_url=live.url, wallet_key=key.key)
    agent.pay(resource_id=resource.id)
    now[0] += timedelta(days=7)
    agent.pay(resource_id=resource.id)
    [reset] = events_of(live, acct.owner_id, "allowance.reset")
    assert reset["wallet_key_id"] == key.id and reset["spent_last_period"] == "1.00"
    assert reset["next_reset_at"] == "2026-12-05T09:00:00+00:00"

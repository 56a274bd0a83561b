"""``POST /pay``: ledger payments for resources and handles, their receipts and events."""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal
from typing import Any

import httpx
import jwt
import pytest
from sqlalchemy.exc import DBAPIError

import svc
from reference_server.domain import payments
from svc.wire import structure

from ..support import LiveServer
from .helpers import D, events_of, market


def test_resource_payment_moves_money_and_records_everything(server: LiveServer) -> None:
    metadata = {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "report", "plan": "pro"}
    m = market(server, price="2.50", metadata=metadata)
    paid = m.agent.pay(resource_id=m.resource.id)
    assert paid.rail == "rill" and paid.receipt_id.startswith("rcpt_")
    assert paid.amount == D("2.50") and paid.resource_id == m.resource.id

    fee = D("0.025")  # 1 % platform fee by default
    assert m.seller.sellers.balance().balance == D("2.50") - fee
    assert m.agent.spend.balance().balance == D("97.50")

    [event] = events_of(server, m.seller_owner_id, "payment.succeeded")
    assert event == {
        "ok": True,
        "type": "resource",
        "rail": "rill",
        "receipt_id": paid.receipt_id,
        "request_id": paid.request_id,
        "resource_id": m.resource.id,
        "short_id": m.resource.short_id,
        "path_or_tool": "/v1/report",
        "metadata": metadata,
        "seller_id": m.seller_id,
        "amount": "2.50",
        "platform_fee": "0.025",
        "processor_payment_intent_id": None,
        "seller_balance": "2.475",
        "environment": "test",
        "settlement": "ledger",
        "_environment": "test",
    }
    # the data the server recorded reads into the SDK's typed model, every field intact
    data = {k: v for k, v in event.items() if k != "_environment"}
    typed = structure(data, svc.PaymentSucceededData)
    assert typed.receipt_id == paid.receipt_id and typed.amount == D("2.50")
    assert typed.platform_fee == D("0.025") and typed.seller_balance == D("2.475")
    assert typed.metadata.credits == 100 and typed.metadata.extra == {"plan": "pro"}

    verdict = svc.Client(base_url=server.url).access.verify(paid.receipt_id, m.resource.id)
    assert verdict.valid and verdict.amount == D("2.50") and verdict.rail == "rill"
    assert verdict.metadata is not None and verdict.metadata.credits == 100


def test_fee_is_configurable(make_server: Any) -> None:
    live = make_server(platform_fee_bps=250)
    m = market(live, price="10.00")
    m.agent.pay(resource_id=m.resource.id)
    assert m.seller.sellers.balance().balance == D("9.75")


def test_replay_returns_the_same_receipt_and_moves_no_money(server: LiveServer) -> None:
    m = market(server)
    once = svc.RequestOptions(idempotency_key="pay-1")
    first = m.agent.pay(resource_id=m.resource.id, options=once)
    again = m.agent.pay(resource_id=m.resource.id, options=once)
    assert again.receipt_id == first.receipt_id
    assert m.agent.spend.balance().balance == D("99.00")
    with pytest.raises(svc.UnprocessableEntityError) as reused:
        other = m.seller.resources.create(kind="http", path="/other", amount="3")
        m.agent.pay(resource_id=other.id, options=once)
    assert reused.value.code == "idempotency_key_reused"
    assert m.agent.spend.balance().balance == D("99.00")
    assert len(events_of(server, m.seller_owner_id, "payment.succeeded")) == 1


def test_pay_requires_an_idempotency_key(server: LiveServer) -> None:
    m = market(server)
    r = httpx.post(
        server.url + "/pay",
        json={"resource_id": m.resource.id},
        headers={"Authorization": f"Bearer {m.wallet_key}"},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "idempotency_key_required"


def test_wallet_key_header_form_is_accepted(server: LiveServer) -> None:
    m = market(server)
    r = httpx.post(
        server.url + "/pay",
        json={"resource_id": m.resource.id},
        headers={"x-svc-vw-key": m.wallet_key, "Idempotency-Key": str(uuid.uuid4())},
    )
    assert r.status_code == 200, r.text
    assert r.json()["receipt_id"].startswith("rcpt_")


def test_deactivated_resource_cannot_be_paid(server: LiveServer) -> None:
    m = market(server)
    m.seller.resources.deactivate(m.resource.id)
    with pytest.raises(svc.ConflictError) as refused:
        m.agent.pay(resource_id=m.resource.id)
    assert refused.value.code == "resource_inactive"
    assert m.agent.spend.balance().balance == D("100.00")


def test_unknown_or_other_environment_resource_is_404(server: LiveServer) -> None:
    m = market(server)
    with pytest.raises(svc.NotFoundError):
        m.agent.pay(resource_id="res_nothing")
    live_seller = svc.Client(base_url=server.url, owner_jwt=m.owner_jwt)
    live_key = live_seller.sellers.create().seller_key  # a live seller of the same owner
    live_resource = svc.Client(base_url=server.url, seller_key=live_key).resources.create(
        kind="http", path="/live", amount="1"
    )
    with pytest.raises(svc.NotFoundError):
        m.agent.pay(resource_id=live_resource.id)  # test money never pays live resources


def test_insufficient_funds(server: LiveServer) -> None:
    m = market(server, price="5.00", fund="4.99")
    with pytest.raises(svc.PaymentRequiredError) as refused:
        m.agent.pay(resource_id=m.resource.id)
    assert refused.value.code == "insufficient_funds"
    assert refused.value.details == {"available": "4.99", "amount": "5.00"}
    assert refused.value.request_id
    assert m.agent.spend.balance().spent_total == D("0")  # the refused charge was not counted


@pytest.mark.parametrize(
    ("policy", "paid", "code", "remedy"),
    [
        ({"price": "5.00", "max_per_tx": "4.00"}, 0, "max_per_tx_exceeded", "higher max_per_tx"),
        ({"price": "1.00", "budget": "2.00"}, 2, "budget_exceeded", "higher budget"),  # lifetime
        ({"allowed_rails": ["x402"]}, 0, "rail_not_allowed", ""),  # applies to ledger pay too
    ],
    ids=["max_per_tx", "budget", "rails"],
)
def test_a_policy_limit_refuses_and_names_the_remedy(
    server: LiveServer, policy: dict[str, Any], paid: int, code: str, remedy: str
) -> None:
    m = market(server, **policy)
    for _ in range(paid):
        m.agent.pay(resource_id=m.resource.id)
    with pytest.raises(svc.PaymentRequiredError) as refused:
        m.agent.pay(resource_id=m.resource.id)
    assert refused.value.code == code
    assert remedy in refused.value.message


def test_handle_transfer(server: LiveServer) -> None:
    m = market(server)
    receiver = svc.Client(base_url=server.url, environment="test")
    receiver_owner = receiver.owners.create("receiver@example.com")
    owner = svc.Client(base_url=server.url, owner_jwt=receiver_owner.owner_jwt, environment="test")
    claimed = owner.handles.create("@Alice_1")
    assert claimed.handle == "@alice_1"
    with pytest.raises(svc.ConflictError):
        m.owner.handles.create("alice_1")
    assert m.agent.handles.resolve("@alice_1").handle == "alice_1"
    with pytest.raises(svc.NotFoundError):
        m.agent.handles.resolve("@nobody")
    paid = m.agent.pay(destination="@alice_1", amount="3.25")
    assert paid.destination == "@alice_1" and paid.amount == D("3.25")
    assert m.agent.spend.balance().balance == D("96.75")
    [event] = events_of(server, receiver_owner.owner_id, "transfer.received")
    assert event["amount"] == "3.25" and event["receipt_id"] == paid.receipt_id
    assert event["account_wallet_balance"] == "3.25"
    # a transfer receipt does not unlock resources
    assert not svc.Client(base_url=server.url).access.verify(paid.receipt_id).valid
    with pytest.raises(svc.NotFoundError):
        m.agent.pay(destination="@nobody", amount="1")


def test_verify_binds_receipt_to_resource_and_seller(server: LiveServer) -> None:
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    anyone = svc.Client(base_url=server.url)
    assert anyone.access.verify(paid.receipt_id).valid
    other = m.seller.resources.create(kind="http", path="/b", amount="1")
    wrong = anyone.access.verify(paid.receipt_id, other.id)
    assert not wrong.valid and wrong.reason == "receipt is for another resource"
    unknown = anyone.access.verify("rcpt_forged")
    assert not unknown.valid and unknown.reason == "unknown receipt"
    assert m.seller.access.verify(paid.receipt_id, m.resource.id).valid
    stranger = market(server).seller
    assert not stranger.access.verify(paid.receipt_id).valid


def test_demo_echo_gate(server: LiveServer) -> None:
    m = market(server)
    r = httpx.get(server.url + "/demo/echo")
    assert r.status_code == 402 and r.headers["cache-control"] == "no-store"
    details = r.json()["error"]["details"]
    assert details["amount"] == "0.01" and details["gate_url"].endswith(
        "/g/" + details["gate_url"].rsplit("/", 1)[1]
    )
    test_demo = httpx.get(server.url + "/demo/echo", headers={"X-Svc-Environment": "test"}).json()[
        "error"
    ]["details"]
    paid = m.agent.pay(resource_id=test_demo["resource_id"])
    for header, value in (
        ("X-Svc-Receipt", paid.receipt_id),
        ("Payment-Receipt", paid.receipt_id),
        ("PAYMENT-RESPONSE", _b64json({"receipt_id": paid.receipt_id})),
        ("Payment-Receipt", _b64json({"reference": paid.receipt_id}, urlsafe=True)),
    ):
        ok = httpx.get(server.url + "/demo/echo?x=1", headers={header: value})
        assert ok.status_code == 200, (header, ok.text)
        assert ok.json()["receipt"]["receipt_id"] == paid.receipt_id
        assert ok.json()["echo"]["query"] == {"x": "1"}
    other = m.agent.pay(resource_id=m.resource.id)
    refused = httpx.get(server.url + "/demo/echo", headers={"X-Svc-Receipt": other.receipt_id})
    assert refused.status_code == 402
    assert "another resource" in refused.json()["error"]["message"]
    garbled = httpx.get(server.url + "/demo/echo", headers={"PAYMENT-RESPONSE": "%%%not"})
    assert garbled.status_code == 402 and "Malformed" in garbled.json()["error"]["message"]


def _b64json(value: dict[str, str], urlsafe: bool = False) -> str:
    raw = json.dumps(value).encode()
    encoded = base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)
    return encoded.decode().rstrip("=") if urlsafe else encoded.decode()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"resource_id": "res_x", "destination": "@a", "amount": "1"},
        {"resource_id": "res_x", "amount": "1"},
        {"destination": "@alice"},
        {"destination": "@alice", "amount": "-1"},
        {"destination": "@alice", "amount": 1},
    ],
)
def test_bad_pay_bodies_are_422(server: LiveServer, body: dict[str, Any]) -> None:
    m = market(server)
    r = httpx.post(
        server.url + "/pay",
        json=body,
        headers={"Authorization": f"Bearer {m.wallet_key}", "Idempotency-Key": str(uuid.uuid4())},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    assert m.agent.spend.balance().balance == Decimal("100.00")


def test_a_deadlocked_transaction_is_run_again(server: LiveServer, monkeypatch: Any) -> None:
    """A payment runs in a group of its own first (``payments.pay_resources``); a
    deadlock there runs it again alone (``payments.pay_resource``), and a deadlock there
    once more runs that transaction again: paid once in the end."""

    class Deadlock(Exception):
        sqlstate = "40P01"

    calls: dict[str, int] = {"pay_resource": 0, "pay_resources": 0}

    def flaky(name: str) -> Any:
        real = getattr(payments, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            result = real(*args, **kwargs)  # writes, then the database aborts the transaction
            if calls[name] == 1:
                raise DBAPIError("UPDATE ledger_accounts ...", {}, Deadlock())
            return result

        return run

    for name in calls:
        monkeypatch.setattr(payments, name, flaky(name))
    m = market(server)
    paid = m.agent.pay(resource_id=m.resource.id)
    assert calls == {"pay_resources": 1, "pay_resource": 2} and paid.receipt_id
    assert m.agent.spend.balance().balance == D("99.00")  # charged once, not twice
    assert len(events_of(server, m.seller_owner_id, "payment.succeeded")) == 1


def test_a_refused_payment_is_reported_to_the_payers_owner(server: LiveServer) -> None:
    m = market(server, price="5.00", fund="1.00")
    with pytest.raises(svc.PaymentRequiredError) as refused:
        m.agent.pay(resource_id=m.resource.id)
    agent_owner_id = _owner_id(server, m.owner_jwt)
    [failed] = events_of(server, agent_owner_id, "payment.failed")
    assert failed["reason"] == "insufficient_funds" == refused.value.code
    assert failed["request_id"] == refused.value.request_id
    assert failed["resource_id"] == m.resource.id and failed["amount"] == "5.00"
    assert failed["wallet_key_id"] == m.wallet_key_id and failed["ok"] is False
    assert events_of(server, m.seller_owner_id, "payment.succeeded") == []
    assert m.agent.spend.balance().spent_total == D("0")


def _owner_id(live: LiveServer, owner_jwt: str) -> str:
    return str(jwt.decode(owner_jwt, options={"verify_signature": False})["sub"])


def test_recycle_moves_seller_balance_into_the_account_wallet(server: LiveServer) -> None:
    m = market(server, price="10.00")
    m.agent.pay(resource_id=m.resource.id)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    part = owner.sellers.recycle(m.seller_id, "4.00")
    assert part.amount == D("4.00") and part.seller_balance == D("5.90")
    assert part.account_wallet_balance == D("4.00")
    rest = owner.sellers.recycle(m.seller_id)
    assert rest.amount == D("5.90") and rest.seller_balance == D("0")
    assert rest.account_wallet_balance == D("9.90")
    with pytest.raises(svc.PaymentRequiredError):
        owner.sellers.recycle(m.seller_id)  # nothing left
    withdrawn = events_of(server, m.seller_owner_id, "seller.withdrawn")
    assert [(e["amount"], e["destination"], e["balance"]) for e in withdrawn] == [
        ("4.00", "account_wallet", "5.90"),
        ("5.90", "account_wallet", "0.00"),
    ]
    stranger = svc.Client(base_url=server.url, owner_jwt=m.owner_jwt, environment="test")
    with pytest.raises(svc.NotFoundError):
        stranger.sellers.recycle(m.seller_id)
    live_view = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt)
    with pytest.raises(svc.NotFoundError):
        live_view.sellers.recycle(m.seller_id)  # the seller lives in test

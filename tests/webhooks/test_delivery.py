"""Signed webhooks end to end: a real server, its outbox worker, a real receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

import svc
from reference_server.store import tables as t
from svc import webhooks

from ..money.helpers import market
from ..support import ALL_EVENT_TYPES, Account, LiveServer, new_account, until
from .conftest import fast
from .receiver import Receiver


def owner_of(live: LiveServer, owner_jwt: str, environment: str = "test") -> svc.Client:
    return svc.Client(base_url=live.url, owner_jwt=owner_jwt, environment=environment)


def funded_endpoint(live: LiveServer, url: str) -> tuple[Account, svc.Client, svc.WebhookEndpoint]:
    """An owner with an endpoint at ``url``, then its wallet key funded: one ``funding.paid``."""
    acct = new_account(live.url)
    owner = owner_of(live, acct.owner_jwt)
    endpoint = owner.webhooks.create(url)
    owner.wallet_keys.fund(acct.wallet_key_id, "1.00")
    return acct, owner, endpoint


def test_ledger_payment_is_delivered_signed(server: LiveServer, receiver: Receiver) -> None:
    m = market(server, price="2.00", metadata={"sku_kind": "credit_topup", "credits": 100})
    seller_owner = owner_of(server, m.seller_owner_jwt)
    endpoint = seller_owner.webhooks.create(receiver.url, events=["payment.succeeded"])
    assert endpoint.signing_secret.startswith("whsec_")
    paid = m.agent.pay(resource_id=m.resource.id)

    [got] = receiver.wait_for(1)
    # an independent HMAC check, straight from the spec's Delivery section
    wid, ts = got.headers["X-Svc-Webhook-Id"], got.headers["X-Svc-Timestamp"]
    expected = hmac.new(
        endpoint.signing_secret.encode(), f"{wid}.{ts}.".encode() + got.body, hashlib.sha256
    ).hexdigest()
    assert got.headers["X-Svc-Signature"] == f"v1,{expected}"
    assert abs(int(ts) - time.time()) < 60
    body = json.loads(got.body)
    assert body["id"] == wid and body["type"] == "payment.succeeded"
    assert set(body) == {"id", "type", "created_at", "data"}
    assert body["data"]["receipt_id"] == paid.receipt_id
    assert body["data"]["metadata"]["credits"] == 100
    # and the SDK's own verifier reads it as a typed event
    event = webhooks.verify(endpoint.signing_secret, got.body, got.headers)
    assert isinstance(event.data, svc.PaymentSucceededData)
    assert event.data.amount == 2 and event.data.settlement == "ledger"

    until(lambda: seller_owner.webhooks.deliveries(endpoint.id).data[0].status == "succeeded")
    [delivery] = seller_owner.webhooks.deliveries(endpoint.id).data
    assert delivery.attempts == 1 and delivery.event_id == wid
    assert delivery.attempt_log[0].status_code == 200
    assert delivery.attempt_log[0].response_body == '{"received": true}'


def test_failing_receiver_gets_it_on_the_fourth_attempt(
    server: LiveServer, receiver: Receiver
) -> None:
    receiver.statuses = [500, 503, 500]
    _, owner, endpoint = funded_endpoint(server, receiver.url)
    got = receiver.wait_for(4)
    assert len({r.headers["X-Svc-Webhook-Id"] for r in got}) == 1  # one event, four tries
    timestamps = [int(r.headers["X-Svc-Timestamp"]) for r in got]
    assert timestamps == sorted(timestamps)
    until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].status == "succeeded")
    [delivery] = owner.webhooks.deliveries(endpoint.id).data
    assert [a.status_code for a in delivery.attempt_log] == [500, 503, 500, 200]
    assert [a.number for a in delivery.attempt_log] == [1, 2, 3, 4]
    assert delivery.attempts == 4
    time.sleep(0.5)
    assert len(receiver.received) == 4  # nothing after success


def test_retry_route_resends_one_delivery(server: LiveServer, receiver: Receiver) -> None:
    _, owner, endpoint = funded_endpoint(server, receiver.url)
    receiver.wait_for(1)
    until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].status == "succeeded")
    [delivery] = owner.webhooks.deliveries(endpoint.id).data
    again = owner.webhooks.retry(endpoint.id, delivery.id)
    assert again.id == delivery.id and again.attempts == 2
    assert [a.trigger for a in again.attempt_log] == ["schedule", "retry"]
    got = receiver.wait_for(2)
    assert got[0].headers["X-Svc-Webhook-Id"] == got[1].headers["X-Svc-Webhook-Id"]
    assert got[0].body == got[1].body  # same bytes, freshly signed
    with pytest.raises(svc.NotFoundError):
        owner.webhooks.retry(endpoint.id, "dlv_unknown")


def test_retry_route_rescues_a_failed_delivery(make_server: Any, receiver: Receiver) -> None:
    live = make_server(**fast(webhook_retry_schedule=(0.1,)))
    receiver.statuses = [500, 500]
    _, owner, endpoint = funded_endpoint(live, receiver.url)
    until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].status == "failed")
    [delivery] = owner.webhooks.deliveries(endpoint.id).data
    assert delivery.attempts == 2 and delivery.next_attempt_at is None
    rescued = owner.webhooks.retry(endpoint.id, delivery.id)
    assert rescued.status == "succeeded" and rescued.attempts == 3


def test_events_allowlist_and_environments_filter(server: LiveServer, make_receiver: Any) -> None:
    only_funding, only_revoked, live_all = make_receiver(), make_receiver(), make_receiver()
    acct = new_account(server.url)
    test_owner = owner_of(server, acct.owner_jwt)
    test_owner.webhooks.create(only_funding.url, events=["funding.paid"])
    test_owner.webhooks.create(only_revoked.url, events=["vw.revoked"])
    owner_of(server, acct.owner_jwt, "live").webhooks.create(live_all.url)
    test_owner.wallet_keys.fund(acct.wallet_key_id, "1.00")
    test_owner.wallet_keys.revoke(acct.wallet_key_id)
    assert [json.loads(r.body)["type"] for r in only_funding.wait_for(1)] == ["funding.paid"]
    assert [json.loads(r.body)["type"] for r in only_revoked.wait_for(1)] == ["vw.revoked"]
    time.sleep(0.6)
    assert len(only_funding.received) == 1 and len(only_revoked.received) == 1
    assert live_all.received == []  # test money never reaches a live endpoint


def test_test_route_sends_a_sample_now(
    server: LiveServer, account: Account, receiver: Receiver
) -> None:
    owner = owner_of(server, account.owner_jwt)
    endpoint = owner.webhooks.create(receiver.url)
    delivery = owner.webhooks.test(endpoint.id)
    assert delivery.status == "succeeded" and delivery.attempts == 1
    assert delivery.attempt_log[0].trigger == "test"
    [got] = receiver.received  # delivered before the call returned
    event = webhooks.verify(endpoint.signing_secret, got.body, got.headers)
    assert event.type == "payment.succeeded"
    assert isinstance(event.data, svc.PaymentSucceededData)
    assert event.data.test is True and event.data.receipt_id.startswith("rcpt_test_")
    assert event.data.request_id == delivery.request_id
    assert event.data.metadata.credits == 100
    assert [d.id for d in owner.webhooks.deliveries(endpoint.id).data] == [delivery.id]


def test_a_failing_endpoint_is_disabled(make_server: Any, receiver: Receiver) -> None:
    live = make_server(**fast(webhook_disable_after_seconds=0.5))
    receiver.statuses = [500] * 50
    acct, owner, endpoint = funded_endpoint(live, receiver.url)
    until(lambda: owner.webhooks.list().data[0].status == "disabled")
    disabled = owner.webhooks.list().data[0]
    assert "failed since" in (disabled.disabled_reason or "")
    seen = len(receiver.received)
    owner.wallet_keys.fund(acct.wallet_key_id, "1.00")
    time.sleep(0.6)
    assert len(receiver.received) == seen  # nothing goes to a disabled endpoint
    receiver.statuses = []
    enabled = owner.webhooks.update(endpoint.id, status="enabled")
    assert enabled.status == "enabled" and enabled.disabled_reason is None
    receiver.wait_for(seen + 1)  # pending deliveries resume


def test_delete_cancels_pending_deliveries(make_server: Any, receiver: Receiver) -> None:
    live = make_server(**fast(webhook_retry_schedule=(30,)))
    receiver.statuses = [500]
    _, owner, endpoint = funded_endpoint(live, receiver.url)
    receiver.wait_for(1)
    until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].attempts == 1)
    deleted = owner.webhooks.delete(endpoint.id)
    assert deleted.status == "deleted"
    assert owner.webhooks.list().data == []
    with pytest.raises(svc.NotFoundError):
        owner.webhooks.deliveries(endpoint.id)


def test_registration_rules(server: LiveServer, account: Account) -> None:
    headers = {"Authorization": f"Bearer {account.owner_jwt}", "X-Svc-Environment": "test"}

    def register(body: dict[str, Any], key: str | None = "k") -> httpx.Response:
        h = {**headers, **({"Idempotency-Key": key + json.dumps(body)} if key else {})}
        return httpx.post(server.url + "/webhooks", json=body, headers=h)

    assert register({"url": "https://example.com/h"}, key=None).json()["error"]["code"] == (
        "idempotency_key_required"
    )
    for body, field in (
        ({}, "url"),
        ({"url": "http://example.com/h"}, "url"),  # plain http only for localhost
        ({"url": "ftp://example.com"}, "url"),
        ({"url": "https://u:p@example.com/h"}, "url"),
        ({"url": "https://example.com", "events": ["payment.exploded"]}, "events"),
        ({"url": "https://example.com", "events": []}, "events"),
    ):
        r = register(body)
        assert r.status_code == 422, body
        assert field in {e["field"] for e in r.json()["error"]["details"]["errors"]}
    ok = register({"url": "http://localhost:9/h", "events": ["funding.paid"]})
    assert ok.status_code == 201 and ok.json()["events"] == ["funding.paid"]
    listed = httpx.get(server.url + "/webhooks", headers=headers).json()["data"]
    assert "signing_secret" not in listed[0]
    catalog = httpx.get(server.url + "/webhooks/events", headers=headers).json()["data"]
    assert {c["type"] for c in catalog} == ALL_EVENT_TYPES


def test_signing_secret_is_sealed_at_rest(server: LiveServer, account: Account) -> None:
    created = owner_of(server, account.owner_jwt).webhooks.create("http://localhost:9/h")
    with server.ctx.db.read() as conn:
        stored = conn.execute(select(t.webhook_endpoints.c.secret_sealed)).scalars().all()
        replays = conn.execute(select(t.idempotency_keys.c.response_body)).scalars().all()
    assert all(created.signing_secret not in value for value in [*stored, *replays])


def test_a_request_id_in_metadata_is_the_sellers_own(
    server: LiveServer, receiver: Receiver
) -> None:
    """``request_id`` is added at the top of an answer only: a seller's metadata keys of
    that name, null or not and at any depth, come back as written from create, get, list,
    the update event and the payment event; list items and nested resources carry none."""
    meta = {"request_id": None, "order": {"request_id": "ord_7", "line": {"request_id": None}}}
    acct = new_account(server.url)
    agent = market(server).agent  # a funded wallet key of another owner
    owner_of(server, acct.owner_jwt).webhooks.create(
        receiver.url, events=["resource.updated", "payment.succeeded"]
    )
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {acct.seller_key}"})

    def seller_keys(metadata: dict[str, Any]) -> dict[str, Any]:
        return {k: metadata[k] for k in metadata if k not in ("sku_kind", "credits", "credit_unit")}

    created = http.post(
        "/resources",
        json={"kind": "http", "path": "/v1/meta", "amount": "0.10", "metadata": meta},
        headers={"Idempotency-Key": "meta-create"},
    ).json()
    assert created["request_id"].startswith("req_") and seller_keys(created["metadata"]) == meta
    got = http.get(f"/resources/{created['id']}").json()
    assert got["request_id"].startswith("req_") and seller_keys(got["metadata"]) == meta
    listed = http.get("/resources").json()
    assert listed["request_id"].startswith("req_")
    assert all("request_id" not in item for item in listed["data"])
    [item] = [item for item in listed["data"] if item["id"] == created["id"]]
    assert seller_keys(item["metadata"]) == meta

    patched = http.patch(
        f"/resources/{created['id']}",
        json={"description": "now described"},
        headers={"Idempotency-Key": "meta-patch"},
    ).json()
    assert seller_keys(patched["metadata"]) == meta
    agent.pay(resource_id=created["id"])
    bodies = [json.loads(r.body) for r in receiver.wait_for(2)]
    by_type = {body["type"]: body["data"] for body in bodies}
    updated = by_type["resource.updated"]["resource"]
    assert "request_id" not in updated and seller_keys(updated["metadata"]) == meta
    paid = by_type["payment.succeeded"]
    assert paid["request_id"].startswith("req_") and seller_keys(paid["metadata"]) == meta
    http.close()


def test_retry_of_a_delivery_being_sent_is_409_with_retry_after(
    server: LiveServer, receiver: Receiver
) -> None:
    """The outbox refuses with a domain error carrying ``retry_after_seconds``; the HTTP
    mapping says it as 409 ``conflict`` with ``Retry-After: 1``, nothing resent."""
    acct, owner, endpoint = funded_endpoint(server, receiver.url)
    receiver.wait_for(1)
    until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].status == "succeeded")
    [delivery] = owner.webhooks.deliveries(endpoint.id).data
    with server.ctx.db.write() as conn:  # as a worker holding its lease would leave it
        conn.execute(
            update(t.webhook_deliveries)
            .where(t.webhook_deliveries.c.id == delivery.id)
            .values(lease_until=server.ctx.now() + timedelta(minutes=5))
        )
    r = httpx.post(
        f"{server.url}/webhooks/{endpoint.id}/deliveries/{delivery.id}/retry",
        headers={"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"},
    )
    assert r.status_code == 409 and r.headers["retry-after"] == "1"
    assert r.json()["error"] == {
        "code": "conflict",
        "message": "This delivery is being sent right now; look at the delivery log in a moment.",
    }
    assert r.json()["request_id"] == r.headers["x-request-id"]
    assert owner.webhooks.deliveries(endpoint.id).data[0].attempts == 1

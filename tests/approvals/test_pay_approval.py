"""``POST /pay`` over the wallet key's approval line: the same approval as pay-url's,
for an in-service resource (the hold credits the seller's balance when paid)."""

from __future__ import annotations

import concurrent.futures
from decimal import Decimal
from typing import Any

import httpx

from ..support import Account, LiveServer, new_account
from .helpers import approval_row, decide


def setup(server: LiveServer, **policy: Any) -> tuple[Account, str]:
    acct = new_account(server.url)
    owner = {"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"}
    r = httpx.patch(
        f"{server.url}/wallet-keys/{acct.wallet_key_id}", json={"policy": policy}, headers=owner
    )
    assert r.status_code == 200, r.text
    r = httpx.post(
        f"{server.url}/wallet-keys/{acct.wallet_key_id}/fund",
        json={"amount": "10.00"},
        headers=owner,
    )
    assert r.status_code == 200, r.text
    r = httpx.post(
        server.url + "/resources",
        json={"kind": "http", "path": "/report", "amount": "0.25"},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    )
    assert r.status_code == 201, r.text
    return acct, str(r.json()["id"])


def pay(server: LiveServer, acct: Account, resource_id: str, key: str) -> httpx.Response:
    return httpx.post(
        server.url + "/pay",
        json={"resource_id": resource_id},
        headers={"Authorization": f"Bearer {acct.wallet_key}", "Idempotency-Key": key},
    )


def spend(server: LiveServer, acct: Account) -> dict[str, Any]:
    r = httpx.get(
        server.url + "/spend/balance", headers={"Authorization": f"Bearer {acct.wallet_key}"}
    )
    return dict(r.json())


def test_pay_waits_then_pays_once(server: LiveServer) -> None:
    acct, resource_id = setup(server, approval_above="0.10")
    asked = pay(server, acct, resource_id, "k")
    assert asked.status_code == 202, asked.text
    body = asked.json()
    assert body["status"] == "pending" and body["resource_id"] == resource_id
    assert body["amount"] == "0.25" and spend(server, acct)["balance"] == "9.75"
    assert pay(server, acct, resource_id, "k").json()["id"] == body["id"]
    assert "0.25" in httpx.get(body["approval_url"]).text
    assert decide(body["approval_url"], "approve").status_code == 200
    paid = pay(server, acct, resource_id, "k")
    assert paid.status_code == 200, paid.text
    replay = pay(server, acct, resource_id, "k")
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["receipt_id"] == paid.json()["receipt_id"]
    assert spend(server, acct)["balance"] == "9.75"
    assert spend(server, acct)["spent_total"] == "0.25"
    row = approval_row(server, body["id"])
    assert (row.status, row.receipt_id) == ("used", paid.json()["receipt_id"])


def test_pay_declined(server: LiveServer) -> None:
    acct, resource_id = setup(server, approval_above="0.10")
    body = pay(server, acct, resource_id, "k").json()
    decide(body["approval_url"], "decline")
    for _ in range(2):
        r = pay(server, acct, resource_id, "k")
        assert r.status_code == 402 and r.json()["error"]["code"] == "approval_declined"
    assert spend(server, acct)["balance"] == "10.00"


def test_concurrent_pays_never_pass_the_held_allowance(server: LiveServer) -> None:
    acct, resource_id = setup(server, approval_above="0.30", allowance="1.00", period="day")
    big = httpx.post(
        server.url + "/resources",
        json={"kind": "http", "path": "/big", "amount": "0.40"},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    ).json()["id"]
    assert pay(server, acct, big, "held").status_code == 202  # 0.40 held: 0.60 left
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: pay(server, acct, resource_id, f"c{i}"), range(8)))
    assert sorted(a.status_code for a in answers).count(200) == 2  # 2 x 0.25 <= 0.60
    left = spend(server, acct)
    assert Decimal(left["spent_this_period"]) == Decimal("0.90")
    assert Decimal(left["remaining_allowance"]) == Decimal("0.10")


def test_a_price_raised_after_the_approval_is_refused_and_its_hold_given_back(
    server: LiveServer,
) -> None:
    acct, resource_id = setup(server, approval_above="0.10")
    body = pay(server, acct, resource_id, "k").json()
    decide(body["approval_url"], "approve")
    raised = httpx.patch(
        f"{server.url}/resources/{resource_id}",
        json={"amount": "0.40"},
        headers={"Authorization": f"Bearer {acct.seller_key}", "Idempotency-Key": "raise"},
    )
    assert raised.status_code == 200, raised.text
    for _ in range(2):  # the refusal is the key's answer from then on
        r = pay(server, acct, resource_id, "k")
        assert r.status_code == 402 and r.json()["error"]["code"] == "approval_amount_exceeded"
    assert spend(server, acct)["balance"] == "10.00"  # the hold is back at once
    assert spend(server, acct)["spent_total"] == "0.00"
    row = approval_row(server, body["id"])
    assert (row.status, row.transfer_id, row.receipt_id) == ("approved", None, None)

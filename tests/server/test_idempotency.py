"""The idempotency layer: one effect per key, under concurrency, on both databases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from reference_server.web import idempotency

from ..support import Account, LiveServer, new_account

RESOURCE = {"kind": "http", "path": "/v1/report", "amount": "0.05"}


def seller(account: Account, key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {account.seller_key}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


def resources_of(server: LiveServer, account: Account) -> list[dict[str, Any]]:
    r = httpx.get(server.url + "/resources", headers=seller(account))
    return list(r.json()["data"])


@pytest.mark.anyio
async def test_fifty_concurrent_requests_with_one_key_make_one_resource(
    server: LiveServer, account: Account
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        responses = await asyncio.gather(
            *(
                http.post("/resources", json=RESOURCE, headers=seller(account, "same-key"))
                for _ in range(50)
            )
        )
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {201, 409}, statuses
    created = {r.json()["id"] for r in responses if r.status_code == 201}
    assert len(created) == 1
    for r in responses:
        if r.status_code == 409:
            assert r.json()["error"]["code"] == "idempotency_in_progress"
    assert [r["id"] for r in resources_of(server, account)] == list(created)


def test_replay_returns_first_response_and_changes_nothing(
    server: LiveServer, account: Account
) -> None:
    first = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account, "k1"))
    again = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account, "k1"))
    assert first.status_code == again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["original-request-id"] == first.json()["request_id"]
    assert again.json()["request_id"] == again.headers["x-request-id"]
    strip = lambda body: {k: v for k, v in body.items() if k != "request_id"}  # noqa: E731
    assert strip(again.json()) == strip(first.json())
    assert len(resources_of(server, account)) == 1


def test_whitespace_and_key_order_do_not_change_the_fingerprint(
    server: LiveServer, account: Account
) -> None:
    headers = {**seller(account, "k2"), "Content-Type": "application/json"}
    a = httpx.post(
        server.url + "/resources",
        content=b'{"kind":"http","path":"/a","amount":"1"}',
        headers=headers,
    )
    b = httpx.post(
        server.url + "/resources",
        content=b'{ "amount": "1",  "path": "/a", "kind": "http" }',
        headers=headers,
    )
    assert a.json()["id"] == b.json()["id"]


def test_same_key_different_body_is_422(server: LiveServer, account: Account) -> None:
    httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account, "k3"))
    r = httpx.post(
        server.url + "/resources",
        json={**RESOURCE, "amount": "0.06"},
        headers=seller(account, "k3"),
    )
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "idempotency_key_reused"
    assert len(resources_of(server, account)) == 1


def test_patch_with_same_key_on_another_resource_is_422(
    server: LiveServer, account: Account
) -> None:
    a = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account)).json()
    b = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account)).json()
    body = {"amount": "0.07"}
    ok = httpx.patch(f"{server.url}/resources/{a['id']}", json=body, headers=seller(account, "p"))
    assert ok.status_code == 200
    r = httpx.patch(f"{server.url}/resources/{b['id']}", json=body, headers=seller(account, "p"))
    assert r.status_code == 422 and r.json()["error"]["code"] == "idempotency_key_reused"
    amounts = {x["id"]: x["amount"] for x in resources_of(server, account)}
    assert amounts == {a["id"]: "0.07", b["id"]: "0.05"}


def test_keys_are_scoped_to_the_credential(server: LiveServer) -> None:
    one, two = new_account(server.url), new_account(server.url)
    r1 = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(one, "shared"))
    r2 = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(two, "shared"))
    assert r1.status_code == r2.status_code == 201
    assert r1.json()["id"] != r2.json()["id"]
    assert r2.json()["seller_id"] == two.seller_id


def test_a_refusal_is_stored_and_replayed(server: LiveServer, account: Account) -> None:
    bad = {**RESOURCE, "amount": "-1"}
    first = httpx.post(server.url + "/resources", json=bad, headers=seller(account, "bad"))
    again = httpx.post(server.url + "/resources", json=bad, headers=seller(account, "bad"))
    assert first.status_code == again.status_code == 422
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["error"] == first.json()["error"]


def test_in_flight_key_is_409_until_its_lease_expires(make_server: Any) -> None:
    now = [datetime(2026, 11, 21, 12, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], idempotency_lease_seconds=30)
    account = new_account(live.url)
    # A request that began and whose process died: an in-flight record and nothing else.
    principal_scope = _seller_scope(live, account)
    fingerprint = idempotency.request_fingerprint("POST", "/resources", RESOURCE)
    idempotency.begin(
        live.ctx.db,
        scope=principal_scope,
        route="POST /resources",
        key="crashed",
        fingerprint=fingerprint,
        now=now[0],
        ttl=timedelta(hours=24),
        lease=timedelta(seconds=30),
        box=live.ctx.box,
    )
    r = httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "crashed"))
    assert r.status_code == 409 and r.json()["error"]["code"] == "idempotency_in_progress"
    assert r.headers["retry-after"] == "1"
    now[0] += timedelta(seconds=31)
    r = httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "crashed"))
    assert r.status_code == 201
    assert len(resources_of(live, account)) == 1


def test_keys_expire_after_the_ttl(make_server: Any) -> None:
    now = [datetime(2026, 11, 21, 12, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**8)
    account = new_account(live.url)
    first = httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "old"))
    now[0] += timedelta(hours=23)
    replay = httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "old"))
    assert replay.json()["id"] == first.json()["id"]
    now[0] += timedelta(hours=2)
    fresh = httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "old"))
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_bad_keys_are_400(server: LiveServer, account: Account, key: str) -> None:
    r = httpx.post(server.url + "/resources", json=RESOURCE, headers=seller(account, key))
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_idempotency_key"
    assert resources_of(server, account) == []


def _seller_scope(live: LiveServer, account: Account) -> str:
    from reference_server.web.auth import Role, authenticate

    with live.ctx.db.read() as conn:
        principal = authenticate(
            conn,
            {"authorization": f"Bearer {account.seller_key}"},
            role=Role.SELLER,
            jwt_secrets=live.ctx.jwt_secrets,
            now=live.ctx.now(),
        )
    return principal.credential_id


def test_created_credentials_are_replayed_but_stored_sealed(server: LiveServer) -> None:
    from sqlalchemy import select

    from reference_server.store import tables as t

    owner = httpx.post(server.url + "/owners", json={"email": "sealed@example.com"}).json()
    headers = {
        "Authorization": f"Bearer {owner['owner_jwt']}",
        "X-Svc-Environment": "test",
        "Idempotency-Key": "new-seller",
    }
    first = httpx.post(server.url + "/sellers", json={}, headers=headers)
    again = httpx.post(server.url + "/sellers", json={}, headers=headers)
    key = first.json()["seller_key"]
    assert again.json()["seller_key"] == key  # a retry after a lost answer still gets it
    with server.ctx.db.read() as conn:
        stored = conn.execute(select(t.idempotency_keys.c.response_body)).scalars().all()
    assert stored and all(key not in body and owner["owner_jwt"] not in body for body in stored)


def test_expired_records_are_purged(make_server: Any) -> None:
    from sqlalchemy import func, select

    from reference_server.store import tables as t

    now = [datetime(2026, 11, 21, 12, 0, tzinfo=UTC)]
    live = make_server(clock=lambda: now[0], jwt_ttl_seconds=10**8)
    account = new_account(live.url)
    httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "a"))
    now[0] += timedelta(hours=12)
    httpx.post(live.url + "/resources", json=RESOURCE, headers=seller(account, "b"))
    now[0] += timedelta(hours=13)
    ttl = timedelta(seconds=live.settings.idempotency_ttl_seconds)
    assert idempotency.purge_expired(live.ctx.db, now=now[0], ttl=ttl) == 1
    with live.ctx.db.read() as conn:
        keys = conn.execute(select(t.idempotency_keys.c.key)).scalars().all()
        assert keys == ["b"]
        mine = select(func.count()).where(t.resources.c.seller_id == account.seller_id)
        assert conn.execute(mine).scalar() == 2

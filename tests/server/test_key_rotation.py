"""Keys rotate, end to end on one database: servers started one after another with the
next keys, as an operator rolls a deployment.

After a rotation the new data key seals and the previous one still opens what it sealed
(a webhook signing secret, the credential kept for an idempotent replay); an owner JWT
signed with the previous secret still authenticates, new ones are signed with the new
secret, and once a secret is retired its JWTs are refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from reference_server.crypto import SecretBox
from reference_server.store import tables as t
from svc import webhooks

from ..support import LiveServer
from ..webhooks.receiver import Receiver

pytestmark = pytest.mark.timeout(120)


def key() -> str:
    return Fernet.generate_key().decode()


def owner_headers(owner_jwt: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {owner_jwt}", "X-Svc-Environment": "test", **extra}


def create_webhook(live: LiveServer, owner_jwt: str, url: str) -> httpx.Response:
    return httpx.post(
        live.url + "/webhooks",
        json={"url": url, "events": ["payment.succeeded"]},
        headers=owner_headers(owner_jwt, **{"Idempotency-Key": "rotation-1"}),
    )


def sealed_secret(live: LiveServer, webhook_id: str) -> str:
    e = t.webhook_endpoints
    with live.ctx.db.read() as conn:
        return str(conn.execute(select(e.c.secret_sealed).where(e.c.id == webhook_id)).scalar_one())


def test_data_keys_and_jwt_secrets_rotate(
    make_server: Callable[..., LiveServer], receiver: Receiver
) -> None:
    k1, k2 = key(), key()
    s1, s2, s3 = (secrets.token_urlsafe(32) for _ in range(3))
    quiet: dict[str, Any] = {"worker_enabled": False}  # deliveries only when asked for

    # Before: K1 and S1.
    before = make_server(data_key=k1, jwt_secret=s1, **quiet)
    owner = httpx.post(before.url + "/owners", json={"email": "rot@example.com"}).json()
    old_jwt = owner["owner_jwt"]
    created = create_webhook(before, old_jwt, receiver.url)
    assert created.status_code == 201, created.text
    hook = created.json()
    before.stop()

    # Rotated: K2 seals (K1 still opens), S2 signs (S1 still verifies).
    after = make_server(
        data_key=k2, data_previous_keys=(k1,), jwt_secret=s2, jwt_previous_secrets=(s1,), **quiet
    )
    listed = httpx.get(after.url + "/webhooks", headers=owner_headers(old_jwt))
    assert listed.status_code == 200, listed.text
    # The idempotent replay returns the credential it stored, sealed under K1.
    replay = create_webhook(after, old_jwt, receiver.url)
    assert replay.status_code == 201, replay.text
    assert replay.json()["signing_secret"] == hook["signing_secret"]
    assert replay.headers.get("idempotent-replayed") == "true"
    # The endpoint's signing secret, sealed under K1, still signs deliveries.
    sent = httpx.post(
        after.url + f"/webhooks/{hook['id']}/test", headers=owner_headers(old_jwt), timeout=30
    )
    assert sent.status_code == 200, sent.text
    [delivery] = receiver.wait_for(1)
    event = webhooks.verify(hook["signing_secret"], delivery.body, delivery.headers)
    assert event.id == delivery.headers["X-Svc-Webhook-Id"]
    # What is sealed now is sealed under K2 alone.
    other = httpx.post(
        after.url + "/webhooks",
        json={"url": receiver.url},
        headers=owner_headers(old_jwt, **{"Idempotency-Key": "rotation-2"}),
    ).json()
    sealed = sealed_secret(after, other["id"])
    assert SecretBox(k2).open(sealed) == other["signing_secret"]
    with pytest.raises(ValueError):
        SecretBox(k1).open(sealed)
    # New owner JWTs are signed with S2.
    new_owner = httpx.post(after.url + "/owners", json={"email": "new@example.com"}).json()
    new_jwt = new_owner["owner_jwt"]
    assert jwt.decode(new_jwt, s2, algorithms=["HS256"], options={"verify_exp": False})
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(new_jwt, s1, algorithms=["HS256"], options={"verify_exp": False})
    after.stop()

    # S1 retired: its JWTs are refused; S2's still work.
    retired = make_server(
        data_key=k2, data_previous_keys=(k1,), jwt_secret=s3, jwt_previous_secrets=(s2,), **quiet
    )
    refused = httpx.get(retired.url + "/webhooks", headers=owner_headers(old_jwt))
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_credential"
    assert httpx.get(retired.url + "/webhooks", headers=owner_headers(new_jwt)).status_code == 200


def test_a_data_key_dropped_too_soon_fails_only_what_it_sealed(
    make_server: Callable[..., LiveServer],
) -> None:
    # A database whose test hot wallet was sealed under K1, served with K2 alone (a
    # development database moved to production without its stored key): the server
    # starts and serves; only the hot wallet's key, when used, names the unknown key.
    first = make_server(data_key=key(), worker_enabled=False)
    sealed_before = first.ctx.secret("pay_url_hot_wallet_test")
    first.stop()

    later = make_server(data_key=key(), worker_enabled=False)
    assert httpx.get(later.url + "/ready").status_code == 200
    owner = httpx.post(later.url + "/owners", json={"email": "moved@example.com"})
    assert owner.status_code == 201, owner.text
    assert later.ctx.secret("pay_url_hot_wallet_test") == sealed_before  # kept, not replaced
    with pytest.raises(ValueError, match="unknown data key"):
        _ = later.ctx.test_hot_wallet_key
    # The receipt signing keys too: no key is published, and payments go on without tokens.
    assert httpx.get(later.url + "/.well-known/jwks.json").json() == {"keys": []}
    later.stop()

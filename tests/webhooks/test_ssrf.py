"""Webhook delivery never reaches internal addresses in production, and never follows a
redirect anywhere."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import svc

from ..support import LiveServer, new_account, until
from .conftest import fast
from .receiver import Receiver


def production(make_server: Any, **overrides: Any) -> LiveServer:
    return make_server(**fast(env="production", signup_enabled=True, **overrides))


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hooks",
        "https://10.0.0.1/hooks",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/hooks",
        "https://[::ffff:10.0.0.1]/hooks",
        "http://localhost:8000/hooks",
        "https://localhost/hooks",
    ],
)
def test_internal_endpoints_are_refused_in_production(make_server: Any, url: str) -> None:
    live = production(make_server)
    acct = new_account(live.url)
    r = httpx.post(
        live.url + "/webhooks",
        json={"url": url},
        headers={
            "Authorization": f"Bearer {acct.owner_jwt}",
            "X-Svc-Environment": "test",
            "Idempotency-Key": url,
        },
    )
    assert r.status_code == 422, r.text
    [error] = r.json()["error"]["details"]["errors"]
    assert error["field"] == "url" and error["message"]
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    assert owner.webhooks.list().data == []


def test_a_name_resolving_to_a_private_address_is_refused_and_nothing_sent(
    make_server: Any, receiver: Receiver
) -> None:
    port = receiver.server.server_address[1]
    resolved: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"] if host == "hooks.example.com" else []

    live = production(make_server, outbound_resolver=resolver)
    acct = new_account(live.url)
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    endpoint = owner.webhooks.create(f"https://hooks.example.com:{port}/hooks")
    owner.wallet_keys.fund(acct.wallet_key_id, "1.00")
    [attempt, *_] = until(lambda: owner.webhooks.deliveries(endpoint.id).data[0].attempt_log)
    assert attempt.status_code is None
    assert attempt.error is not None and "127.0.0.1" in attempt.error
    assert "loopback" in attempt.error
    assert "hooks.example.com" in resolved
    assert receiver.received == []  # refused before connecting


def test_a_redirect_is_never_followed(make_server: Any, receiver: Receiver) -> None:
    live = make_server(**fast(webhook_retry_schedule=(60,)))
    receiver.redirect_to = "http://169.254.169.254/latest/meta-data/"
    acct = new_account(live.url)
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    endpoint = owner.webhooks.create(receiver.url)
    delivery = owner.webhooks.test(endpoint.id)
    assert delivery.status == "pending"  # a failure: retried later, not followed now
    [attempt] = delivery.attempt_log
    assert attempt.status_code == 302
    assert attempt.error is not None and "not followed" in attempt.error
    assert len(receiver.received) == 1

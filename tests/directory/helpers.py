"""A seller on a live server, over plain HTTP: create and change resources, read the
directory as anyone does (no credential)."""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import httpx

from ..support import LiveServer, new_account


@attrs.frozen
class Seller:
    live: LiveServer
    seller_key: str
    owner_jwt: str
    environment: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.seller_key}"}

    def create(self, **body: Any) -> httpx.Response:
        body.setdefault("kind", "http")
        body.setdefault("path", f"/v1/{secrets.token_hex(4)}")
        body.setdefault("amount", "0.05")
        return httpx.post(f"{self.live.url}/resources", json=body, headers=self.headers)

    def created(self, **body: Any) -> dict[str, Any]:
        r = self.create(**body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def patch(self, resource_id: str, **body: Any) -> httpx.Response:
        headers = {**self.headers, "Idempotency-Key": secrets.token_hex(8)}
        return httpx.patch(f"{self.live.url}/resources/{resource_id}", json=body, headers=headers)

    def enable_payments(self) -> None:
        r = httpx.patch(f"{self.live.url}/sellers/me/payments", json={}, headers=self.headers)
        assert r.status_code == 200, r.text


def seller(live: LiveServer, environment: str = "test") -> Seller:
    account = new_account(live.url, environment)
    return Seller(
        live=live,
        seller_key=account.seller_key,
        owner_jwt=account.owner_jwt,
        environment=environment,
    )


def directory(live: LiveServer, environment: str | None = "test", **params: Any) -> httpx.Response:
    headers = {} if environment is None else {"X-Svc-Environment": environment}
    return httpx.get(f"{live.url}/directory", params=params, headers=headers)


#: The seller of the demonstration gate, whose resource every server lists in each
#: environment (``domain.demo_gate``).
DEMO_SELLER = "svc demo"


def entries(r: httpx.Response) -> list[dict[str, Any]]:
    """The entries of a directory page but the demonstration gate's."""
    assert r.status_code == 200, r.text
    return [e for e in r.json()["data"] if e["seller_name"] != DEMO_SELLER]


def ids(r: httpx.Response) -> list[str]:
    return [entry["id"] for entry in entries(r)]


def refused(r: httpx.Response, field: str) -> str:
    """A 422 naming ``field``; its message for it."""
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"]["code"] == "validation_error", body
    messages = {e["field"]: e["message"] for e in body["error"]["details"]["errors"]}
    assert field in messages, messages
    return messages[field]

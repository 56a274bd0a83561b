"""Processor events as Stripe sends them: signed with the endpoint's secret by Stripe's
documented scheme (``t=<unix>,v1=<hex HMAC-SHA256 of "t.payload">``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import httpx

WEBHOOK_SECRET = "whsec_test_" + "a" * 32


def event(type: str, obj: dict[str, Any], *, account: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "evt_" + secrets.token_hex(12),
        "object": "event",
        "type": type,
        "created": int(time.time()),
        "livemode": False,
        "api_version": "2025-10-29.clover",
        "pending_webhooks": 1,
        "data": {"object": obj},
    }
    if account is not None:
        body["account"] = account
    return body


def sign(payload: bytes, secret: str = WEBHOOK_SECRET, *, at: int | None = None) -> str:
    stamp = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{stamp}.".encode() + payload, hashlib.sha256)
    return f"t={stamp},v1={mac.hexdigest()}"


def deliver(base_url: str, body: dict[str, Any], *, signature: str | None = None) -> httpx.Response:
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    headers["Stripe-Signature"] = sign(payload) if signature is None else signature
    return httpx.post(f"{base_url}/processor/webhooks", content=payload, headers=headers)

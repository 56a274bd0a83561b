"""Processor events as Stripe sends them, signed with the endpoint's secret by the SDK's own
signing helper."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import httpx

from ..stripe_double import events

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
    """The double's signing (the SDK's own helper), with this endpoint's secret."""
    return events.sign(payload, secret, at)


def deliver(base_url: str, body: dict[str, Any], *, signature: str | None = None) -> httpx.Response:
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    headers["Stripe-Signature"] = sign(payload) if signature is None else signature
    return httpx.post(f"{base_url}/processor/webhooks", content=payload, headers=headers)

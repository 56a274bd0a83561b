"""Events the double emits, delivered in the background to the configured webhook URL and
signed by the SDK's own signing helper, so ``stripe.Webhook.construct_event`` verifies them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import httpx
import stripe

from .objects import API_VERSION, new_id, now

__all__ = ["Emitter", "sign"]

#: Pauses before each retry of a failed delivery (so at most len+1 attempts).
RETRY_DELAYS = (0.2, 0.5, 1.0)


def sign(payload: bytes, secret: str, at: int | None = None) -> str:
    header: str = stripe.WebhookSignature.generate_signature_header(
        payload.decode(), secret, timestamp=at
    )
    return header


@attrs.define
class Delivery:
    """One event's way to the webhook URL: every attempt's answer (a status or an error)."""

    event: str
    type: str
    status: str = "pending"
    attempts: list[dict[str, Any]] = attrs.Factory(list)

    def as_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "type": self.type,
            "status": self.status,
            "attempts": list(self.attempts),
        }


@attrs.define
class Emitter:
    url: str | None = None
    secret: str | None = None
    events: dict[str, dict[str, Any]] = attrs.Factory(dict)
    deliveries: list[Delivery] = attrs.Factory(list)
    _tasks: set[asyncio.Task[None]] = attrs.Factory(set)

    def reset(self) -> None:
        self.url = self.secret = None
        self.events.clear()
        self.deliveries.clear()

    def emit(
        self,
        type: str,
        obj: dict[str, Any],
        *,
        account: str | None = None,
        request: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "object": "event",
            "type": type,
            "api_version": API_VERSION,
            "created": now(),
            "livemode": False,
            "pending_webhooks": 1,
            "data": {"object": obj},
            "request": request or {"id": None, "idempotency_key": None},
        }
        if account is not None:
            event["account"] = account
        self.events[event["id"]] = event
        self.deliver(event)
        return event

    def deliver(self, event: dict[str, Any]) -> None:
        """Send in the background (the caller's answer does not wait for the receiver)."""
        if self.url is None or self.secret is None:
            return
        delivery = Delivery(event=event["id"], type=event["type"])
        self.deliveries.append(delivery)
        task = asyncio.get_running_loop().create_task(
            self._send(event, delivery, self.url, self.secret)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, event: dict[str, Any], delivery: Delivery, url: str, secret: str) -> None:
        payload = json.dumps(event).encode()
        async with httpx.AsyncClient(timeout=10) as http:
            for delay in (*RETRY_DELAYS, None):
                headers = {
                    "Content-Type": "application/json; charset=utf-8",
                    "Stripe-Signature": sign(payload, secret),
                }
                try:
                    answer = await http.post(url, content=payload, headers=headers)
                except httpx.HTTPError as exc:
                    delivery.attempts.append({"status": None, "error": repr(exc)})
                else:
                    delivery.attempts.append({"status": answer.status_code, "error": None})
                    if answer.is_success:
                        delivery.status = "delivered"
                        return
                if delay is None:
                    break
                await asyncio.sleep(delay)
        delivery.status = "failed"

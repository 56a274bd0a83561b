"""``svc listen``: forward the owner's Test events to a local receiver, as ``stripe
listen`` does.  A listener endpoint is registered; its deliveries are long-polled, posted
to the local URL with their original body and signature headers (nothing is re-signed, so
the receiver verifies them with the secret printed at start), acknowledged with the local
answer (the delivery log records it; a failure is retried as usual), and the endpoint is
deleted on exit."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import httpx

from ._client import Client
from ._models import ListenedDelivery
from ._options import RequestOptions

__all__ = ["listen"]

#: How long one poll waits on the service for a delivery (seconds).
POLL_WAIT = 25.0


def listen(
    client: Client,
    forward_to: str,
    *,
    events: Sequence[str] | None,
    say: Callable[[str], None],
    stop: threading.Event,
    wait: float = POLL_WAIT,
) -> None:
    """Forward until ``stop`` is set (or interrupted); the endpoint is deleted on the way
    out, whatever ended the loop."""
    created = client.webhooks.listen(events=events)
    try:
        say(f"Ready! Your webhook signing secret is {created.signing_secret} ({created.id})")
        options = RequestOptions(timeout=wait + 15)
        with httpx.Client(timeout=30.0) as local:
            while not stop.is_set():
                batch = client.webhooks.poll(created.id, wait=wait, options=options)
                for delivery in batch.data:
                    status, error = _forward(local, forward_to, delivery)
                    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
                    shown = f"[{status}]" if error is None else f"[error: {error}]"
                    say(f"{when}  {delivery.event_type}  {delivery.event_id}  -> {shown}")
                    client.webhooks.ack(
                        created.id,
                        delivery_id=delivery.delivery_id,
                        status_code=status,
                        error=error,
                    )
    finally:
        client.webhooks.delete(created.id)


def _forward(
    local: httpx.Client, url: str, delivery: ListenedDelivery
) -> tuple[int | None, str | None]:
    """POST the delivery as the outbox would have; the status, or why there is none."""
    try:
        response = local.post(url, content=delivery.body.encode(), headers=delivery.headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    return response.status_code, None

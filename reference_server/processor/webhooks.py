"""``POST /processor/webhooks``: the processor's events in.

An event is verified with the SDK's own signature check against
``SVC_STRIPE_WEBHOOK_SECRET`` (a stale or forged one is refused), then recorded in
``processor_events`` and applied in one transaction: a redelivery of the same event id
finds the row and changes nothing, and an event whose application fails is not recorded,
so the processor's retry applies it later.  Types the server does not act on are
acknowledged and recorded as not applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import stripe
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from ..domain.errors import DomainError
from ..domain.events import writing
from ..settings import Settings
from ..store import Database
from ..store import tables as t
from . import checkout, connect_events, refund_events
from .events import Handler, ProcessorEvent

__all__ = ["HANDLERS", "Received", "receive", "verify"]

#: Every event type the server acts on, and what applying it does.
HANDLERS: Mapping[str, Handler] = {
    **connect_events.HANDLERS,
    **checkout.HANDLERS,
    **refund_events.HANDLERS,
}

Received = Literal["applied", "ignored", "duplicate"]

_pe = t.processor_events
#: How old a signed event may be (the SDK's own default for ``construct_event``): a
#: captured delivery cannot be replayed later.
_TOLERANCE_SECONDS = 300


def verify(settings: Settings, payload: bytes, signature: str | None) -> ProcessorEvent:
    """The event, if the processor signed it with our endpoint's secret recently."""
    secret = settings.stripe_webhook_secret
    if secret is None:
        raise DomainError("not_found", "This server takes no processor webhooks.")
    try:
        stripe.WebhookSignature.verify_header(
            payload.decode("utf-8"), signature or "", secret, tolerance=_TOLERANCE_SECONDS
        )
    except (stripe.SignatureVerificationError, UnicodeDecodeError):
        raise DomainError(
            "invalid_signature",
            "The Stripe-Signature header does not verify against this server's webhook "
            "secret (or its timestamp is too old).",
        ) from None
    try:
        return _event(json.loads(payload))
    except (ValueError, KeyError, TypeError):
        raise DomainError("bad_request", "The event is not a processor event object.") from None


def _event(body: Any) -> ProcessorEvent:
    data = body["data"]["object"]
    if not isinstance(body["id"], str) or not isinstance(data, dict):
        raise TypeError("not an event")
    return ProcessorEvent(
        id=body["id"],
        type=str(body["type"]),
        account=body.get("account"),
        livemode=bool(body.get("livemode", False)),
        created_at=datetime.fromtimestamp(int(body["created"]), UTC),
        object=data,
    )


def receive(
    db: Database,
    settings: Settings,
    event: ProcessorEvent,
    now: datetime,
    *,
    notify: Callable[[], None],
) -> Received:
    """Record ``event`` once and apply it in the same transaction; ``notify`` is called
    when applying it recorded events of ours (webhook deliveries are due)."""
    handler = HANDLERS.get(event.type)
    try:
        with writing(db, notify) as conn:
            seen = conn.execute(select(_pe.c.id).where(_pe.c.id == event.id)).first()
            if seen is not None:
                return "duplicate"
            conn.execute(
                insert(_pe).values(
                    id=event.id,
                    type=event.type,
                    account=event.account,
                    livemode=event.livemode,
                    event_created_at=event.created_at,
                    applied=handler is not None,
                    received_at=now,
                )
            )
            if handler is not None:
                handler(conn, event, settings, now)
    except IntegrityError:
        with db.read() as conn:
            if conn.execute(select(_pe.c.id).where(_pe.c.id == event.id)).first() is None:
                raise
        return "duplicate"  # the same event delivered twice at once; the other recorded it
    return "ignored" if handler is None else "applied"

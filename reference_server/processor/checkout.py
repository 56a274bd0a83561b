"""Card payments and card top-ups through Stripe Checkout, booked only when the processor
says the session was paid.

:func:`prepare` writes our ``card_checkouts`` row first (its id, derived from our own
idempotency key, is the processor's ``Idempotency-Key`` and rides in the session's and
the PaymentIntent's ``metadata``), then :func:`open_session` creates the session through
the SDK and keeps its id and URL: a retried or double-submitted start gets the same
session.  The events in :data:`HANDLERS` then move the row, inside the transaction that
records the event (:mod:`.webhooks`):

* ``checkout.session.completed`` (``payment_status`` ``paid``) books it once per session
  -- a conditional update claims the row -- as a card sale
  (:func:`~reference_server.domain.card_payments.book_card_sale`, with the real
  PaymentIntent id) or a card top-up (:func:`~reference_server.domain.top_ups.book_card`);
* ``checkout.session.expired`` -- abandoned: ``expired``, nothing booked;
* ``payment_intent.payment_failed`` -- declined: ``failed`` with the processor's reason,
  nothing booked (Checkout lets the payer try another card, which completes it);
* ``charge.refunded`` -- dated on the row; a refund of ours it lists is booked by
  :mod:`.refund_events` (one made at the processor's dashboard books nothing).

Sessions we did not create (no row of ours) are acknowledged and left alone.  The price
must be whole cents: a card charges cents, and charging a rounded amount would book a
price the payer did not pay (:func:`cents` refuses it).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
import stripe
from sqlalchemy import Connection, Row, insert, select, update
from sqlalchemy.exc import IntegrityError
from stripe.params.checkout import SessionCreateParams

from ..domain import card_payments, top_ups
from ..domain.errors import DomainError
from ..settings import Settings
from ..store import Database
from ..store import tables as t
from .client import stripe_client
from .events import Handler, ProcessorEvent

__all__ = [
    "HANDLERS",
    "SALE",
    "TOP_UP",
    "Checkout",
    "cents",
    "checkout_id",
    "find_by_session",
    "open_session",
    "prepare",
]

log = logging.getLogger(__name__)

SALE = "sale"
TOP_UP = "top_up"
#: Micro-USD in a cent.
_CENT = 10_000
#: Checkout's smallest USD charge.
MIN_CENTS = 50
_cc = t.card_checkouts
#: Statuses from which a completion still books (a declined card may be followed by
#: another card on the same session).
_PAYABLE = ("open", "failed")


@attrs.frozen(kw_only=True)
class Checkout:
    """What to charge, for what, and where the payer comes back to."""

    id: str
    kind: str
    environment: str
    amount_micros: int
    name: str
    success_url: str
    cancel_url: str
    resource_id: str | None = None
    owner_id: str | None = None
    top_up_id: str | None = None

    @property
    def metadata(self) -> dict[str, str]:
        """What the session pays, as the processor shows it (and echoes in events)."""
        named = {
            "svc_checkout_id": self.id,
            "kind": self.kind,
            "environment": self.environment,
            "resource_id": self.resource_id,
            "owner_id": self.owner_id,
            "top_up_id": self.top_up_id,
        }
        return {k: v for k, v in named.items() if v is not None}


def checkout_id(scope: str, key: str) -> str:
    """Our checkout id for an idempotency key of ours: the same key, the same id."""
    digest = hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()
    return f"cco_{digest[:32]}"


def cents(amount_micros: int) -> int:
    """``amount_micros`` in cents, if a card can be charged exactly that."""
    whole, rest = divmod(amount_micros, _CENT)
    if rest:
        raise _amount_refused(
            "A card is charged in whole cents; this amount has a fraction of a cent.",
            "must be whole cents for a card",
        )
    if whole < MIN_CENTS:
        raise _amount_refused(
            "The card processor takes at least 0.50 USD.", "must be at least 0.50 for a card"
        )
    return whole


def _amount_refused(message: str, field_message: str) -> DomainError:
    errors = [{"field": "amount", "message": field_message}]
    return DomainError("validation_error", message, details={"errors": errors})


def prepare(conn: Connection, checkout: Checkout, now: datetime) -> Row[Any]:
    """Our row for ``checkout``, written once (a second call finds the first's)."""
    found = conn.execute(select(_cc).where(_cc.c.id == checkout.id)).first()
    if found is not None:
        return found
    conn.execute(
        insert(_cc).values(
            id=checkout.id,
            kind=checkout.kind,
            environment=checkout.environment,
            resource_id=checkout.resource_id,
            owner_id=checkout.owner_id,
            top_up_id=checkout.top_up_id,
            amount_micros=checkout.amount_micros,
            status="open",
            created_at=now,
            updated_at=now,
        )
    )
    return conn.execute(select(_cc).where(_cc.c.id == checkout.id)).one()


def open_session(db: Database, settings: Settings, checkout: Checkout, now: datetime) -> str:
    """The processor's Checkout URL for ``checkout``, its session created once.

    Called outside any transaction (it is a network call); the SDK retries with backoff
    under the same ``Idempotency-Key``, and a later call with the same checkout is
    answered the same session by the processor."""
    with db.read() as conn:
        row = conn.execute(select(_cc.c.url).where(_cc.c.id == checkout.id)).first()
    if row is not None and row.url:
        return str(row.url)
    params: SessionCreateParams = {
        "mode": "payment",
        "line_items": [
            {
                "quantity": 1,
                "price_data": {
                    "currency": "usd",
                    "unit_amount": cents(checkout.amount_micros),
                    "product_data": {"name": checkout.name[:250] or "Payment"},
                },
            }
        ],
        "success_url": checkout.success_url,
        "cancel_url": checkout.cancel_url,
        "client_reference_id": checkout.id,
        "metadata": checkout.metadata,
        "payment_intent_data": {"metadata": checkout.metadata},
    }
    try:
        session = stripe_client(settings).v1.checkout.sessions.create(
            params=params,
            options={"idempotency_key": f"svc-checkout-{checkout.id}"},
        )
    except stripe.StripeError as exc:
        raise DomainError(
            "settlement_unavailable",
            f"The card processor could not start the payment now ({exc.user_message or exc}); "
            "nothing was charged, retry shortly.",
        ) from None
    if not session.url:
        raise DomainError("settlement_unavailable", "The card processor gave no checkout URL.")
    with db.write() as conn:
        try:
            conn.execute(
                update(_cc)
                .where(_cc.c.id == checkout.id)
                .values(session_id=session.id, url=session.url, updated_at=now)
            )
        except IntegrityError:  # pragma: no cover - the processor answered another id
            raise DomainError("conflict", "The checkout session is recorded already.") from None
    return str(session.url)


def find_by_session(conn: Connection, session_id: str) -> Row[Any] | None:
    return conn.execute(select(_cc).where(_cc.c.session_id == session_id)).first()


def _ours(conn: Connection, obj: Mapping[str, Any]) -> Row[Any] | None:
    """Our row for an event's object: by the id in its metadata, else by session id or
    PaymentIntent id; ``None`` for a payment this server did not start."""
    metadata = obj.get("metadata") or {}
    ours = metadata.get("svc_checkout_id") if isinstance(metadata, Mapping) else None
    if isinstance(ours, str):
        row = conn.execute(select(_cc).where(_cc.c.id == ours)).first()
        if row is not None:
            return row
    object_id = obj.get("id")
    if obj.get("object") == "checkout.session" and isinstance(object_id, str):
        return find_by_session(conn, object_id)
    intent = object_id if obj.get("object") == "payment_intent" else obj.get("payment_intent")
    if isinstance(intent, str):
        return conn.execute(select(_cc).where(_cc.c.payment_intent == intent)).first()
    return None


def _intent_id(value: Any) -> str | None:
    """A PaymentIntent as an event carries it: its id, or the object when expanded."""
    if isinstance(value, Mapping):
        value = value.get("id")
    return value if isinstance(value, str) else None


def _completed(conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime) -> None:
    obj = event.object
    row = _ours(conn, obj)
    if row is None:
        log.info("checkout session %s is not ours; ignored", obj.get("id"))
        return
    intent = _intent_id(obj.get("payment_intent"))
    if obj.get("payment_status") != "paid":  # a delayed method: not paid yet
        conn.execute(update(_cc).where(_cc.c.id == row.id).values(payment_intent=intent))
        return
    total = obj.get("amount_total")
    if isinstance(total, int) and total * _CENT != int(row.amount_micros):
        raise ValueError(f"checkout {row.id} was paid {total} cents, not its amount")
    # The session id, too, when our write of it was lost after the processor made it.
    session_id = row.session_id or obj.get("id")
    claimed = conn.execute(
        update(_cc)
        .where(_cc.c.id == row.id, _cc.c.status.in_(_PAYABLE))
        .values(
            status="complete",
            payment_intent=intent,
            session_id=session_id,
            failure_reason=None,
            updated_at=now,
        )
    ).rowcount
    if claimed != 1:
        return  # booked already (another event of the same session), or expired
    if intent is None:
        raise ValueError(f"checkout session {obj.get('id')} was paid without a PaymentIntent")
    if row.kind == SALE:
        _book_sale(conn, row, intent, settings, event, now)
    else:
        top_ups.book_card(conn, row.top_up_id, payment_intent=intent, now=now)


def _book_sale(
    conn: Connection,
    row: Row[Any],
    intent: str,
    settings: Settings,
    event: ProcessorEvent,
    now: datetime,
) -> None:
    r = t.resources
    query = select(r).where(r.c.id == row.resource_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    # Booked even if the seller deactivated it since: the payer's money arrived.
    resource = conn.execute(query).one()
    receipt_id = card_payments.book_card_sale(
        conn,
        resource=resource,
        fee_bps=settings.platform_fee_bps,
        request_id=event.id[:64],
        now=now,
        amount=int(row.amount_micros),
        payment_intent_id=intent,
    )
    conn.execute(update(_cc).where(_cc.c.id == row.id).values(receipt_id=receipt_id))


def _expired(conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime) -> None:
    row = _ours(conn, event.object)
    if row is not None:
        _close(conn, row, "expired", now)


def _close(conn: Connection, row: Row[Any], status: str, now: datetime, **values: Any) -> None:
    """End a checkout still payable as ``status`` (``expired``, ``failed``), and the card
    top-up it was for with it: one rule for both events."""
    closed = conn.execute(
        update(_cc)
        .where(_cc.c.id == row.id, _cc.c.status.in_(_PAYABLE))
        .values(status=status, updated_at=now, **values)
    ).rowcount
    if closed and row.top_up_id is not None:
        top_ups.close_card(conn, row.top_up_id, status=status)


def _failed(conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime) -> None:
    obj = event.object
    row = _ours(conn, obj)
    if row is None:
        return
    error = obj.get("last_payment_error") or {}
    reason = "card_declined"
    if isinstance(error, Mapping):
        reason = str(error.get("decline_code") or error.get("code") or reason)
        if error.get("message"):
            reason = f"{reason}: {error['message']}"
    intent = _intent_id(obj.get("id"))
    _close(conn, row, "failed", now, failure_reason=reason[:500], payment_intent=intent)


def _refunded(conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime) -> None:
    """The refund dated on our row (:mod:`.refund_events` books refunds of ours)."""
    row = _ours(conn, event.object)
    if row is not None:
        conn.execute(update(_cc).where(_cc.c.id == row.id).values(refunded_at=now))
        log.info("checkout %s was refunded at the processor", row.id)


#: Event type -> what applying it does.
HANDLERS: dict[str, Handler] = {
    "checkout.session.completed": _completed,
    "checkout.session.async_payment_succeeded": _completed,
    "checkout.session.expired": _expired,
    "payment_intent.payment_failed": _failed,
    "charge.refunded": _refunded,
}

"""Webhook endpoints, the event catalog, the delivery log, test sends and retries
(owner JWT; endpoints live in the request's environment)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import attrs
from sqlalchemy import Connection, select, update

from svc import (
    Delivery,
    DeliveryAttempt,
    DeliveryList,
    EventCatalog,
    EventType,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookEndpointList,
)
from svc.bodies import CreateWebhook, UpdateWebhook

from ..domain import webhook_endpoints as endpoints
from ..domain.events import EVENT_TYPES, new_delivery
from ..ids import new_id
from ..outbound import OutboundPolicy, OutboundRefused, check_url
from ..outbox import claim_one, deliver_job_sync
from ..outbox.delivery import LISTEN_URL
from ..settings import Settings
from ..store import tables as t
from ..timeutil import as_utc
from ..web import paging
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields

__all__ = ["ENDPOINTS"]

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_d = t.webhook_deliveries
_e = t.webhook_endpoints
#: Deliveries with their event's type, as the delivery log shows them.
_DELIVERIES = select(_d, t.events.c.type).join(t.events, t.events.c.id == _d.c.event_id)


def _check_url(f: Fields, url: str, settings: Settings) -> None:
    """HTTPS (http only for localhost outside production), no credentials, and — the same
    rules deliveries are held to — no private, loopback or metadata address in production.
    A name is checked again, resolved, at every delivery.  (The body's shape has already
    made it an absolute http(s) URL.)"""
    production = settings.production
    parts = urlsplit(url)
    local = (parts.hostname or "").lower() in _LOCAL_HOSTS
    if parts.scheme != "https" and (production or not local):
        f.error(
            "url",
            "must be an https URL"
            + ("" if production else " (http is allowed only for localhost outside production)"),
        )
    elif production and local:
        f.error("url", "must not point at this machine in production")
    elif parts.username or parts.password:
        f.error("url", "must not carry credentials")
    else:
        try:
            check_url(url, OutboundPolicy.from_settings(settings))
        except OutboundRefused as exc:
            f.error("url", f"is refused: {exc}")


def _check_events(f: Fields, events: list[str] | None) -> None:
    if events is not None and not events:
        f.error("events", "must name at least one event type, or be left out for all")


def create(call: Call) -> Reply:
    """Register an endpoint; its signing secret is shown only in this answer."""
    owner = call.caller
    b = call.input(CreateWebhook)
    f = Fields.rules(call.body)
    _check_url(f, b.url, call.ctx.settings)
    _check_events(f, b.events)
    f.done()
    secret = endpoints.new_signing_secret()
    row = endpoints.create_endpoint(
        call.conn,
        owner_id=owner.owner_id,
        environment=call.environment,
        url=b.url,
        events=b.events,
        description=b.description,
        secret=secret,
        box=call.ctx.box,
        now=call.now,
    )
    model = endpoints.endpoint_model(row)
    created = WebhookEndpointCreated(**attrs.asdict(model, recurse=False), signing_secret=secret)
    return Reply(created, 201, secret=True)


@paged
def list_all(call: Call, request: PageRequest) -> Reply:
    """The owner's endpoints in this environment, oldest first (paged); ``svc listen``'s
    temporary listener endpoints are left out."""
    owner = call.caller
    page = endpoints.list_endpoints(
        call.conn, request, owner_id=owner.owner_id, environment=call.environment
    )
    data = [endpoints.endpoint_model(r) for r in page.rows]
    return Reply(WebhookEndpointList(data=data, has_more=page.has_more))


def catalog(call: Call) -> Reply:
    """Every event type the service emits; endpoints without ``events`` get them all."""
    return Reply(
        EventCatalog(data=[EventType(type=k, description=v) for k, v in EVENT_TYPES.items()])
    )


def patch(call: Call) -> Reply:
    """Change ``events``, ``description`` or ``status`` (``enabled`` re-enables an endpoint
    that was disabled after failing)."""
    row = _own(call)
    b = call.input(UpdateWebhook)
    f = Fields.rules(call.body)
    _check_events(f, b.events)
    f.done()
    values: dict[str, Any] = {}
    if f.present("events"):  # null: every event
        values["events"] = b.events
    if b.description is not None:
        values["description"] = b.description
    status = b.status
    if values:
        call.conn.execute(update(_e).where(_e.c.id == row.id).values(**values))
    if status is not None:
        endpoints.set_status(
            call.conn,
            row.id,
            status,
            reason="disabled by its owner" if status == "disabled" else None,
        )
    return _reloaded(call, row.id)


def delete(call: Call) -> Reply:
    """Delete the endpoint; its pending deliveries are cancelled."""
    row = _own(call)
    endpoints.set_status(call.conn, row.id, "deleted")
    call.conn.execute(
        update(_d)
        .where(_d.c.endpoint_id == row.id, _d.c.status == "pending")
        .values(status="cancelled", next_attempt_at=None)
    )
    return _reloaded(call, row.id)


def _reloaded(call: Call, endpoint_id: str) -> Reply:
    """The endpoint as the handler's own changes left it."""
    row = call.conn.execute(select(_e).where(_e.c.id == endpoint_id)).one()
    return Reply(endpoints.endpoint_model(row))


@paged
def deliveries(call: Call, request: PageRequest) -> Reply:
    """The delivery log, newest first (paged), with every attempt of each delivery."""
    row = _own(call)
    page = paging.page(
        call.conn,
        request,
        _DELIVERIES,
        table=_d,
        scope=[_d.c.endpoint_id == row.id],
        order="desc",
    )
    models = [_delivery_model(call.conn, r) for r in page.rows]
    return Reply(DeliveryList(data=models, has_more=page.has_more))


def test(call: Call) -> Reply:
    """Send a signed ``payment.succeeded`` sample now (``test: true``) and log it."""
    row = _own(call)
    sample = {
        "ok": True,
        "type": "resource",
        "rail": "rill",
        "receipt_id": "rcpt_test_" + secrets.token_hex(8),
        "request_id": call.request_id,
        "resource_id": "res_test_sample",
        "short_id": "sample",
        "path_or_tool": "/sample",
        "metadata": {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "credit"},
        "seller_id": "sel_test_sample",
        "amount": "1.00",
        "platform_fee": "0.01",
        "processor_payment_intent_id": None,
        "seller_balance": "0.99",
        "environment": row.environment,
        "settlement": "ledger",
        "test": True,
    }
    event_id = new_id("evt")
    call.conn.execute(
        t.events.insert().values(
            id=event_id,
            environment=row.environment,
            owner_id=row.owner_id,
            type="payment.succeeded",
            data=sample,
            created_at=call.now,
        )
    )
    delivery = new_delivery(event_id, row.id, call.now)
    call.conn.execute(_d.insert().values(**delivery))
    return _send_now(call, delivery["id"], trigger="test")


def retry(call: Call) -> Reply:
    """Send one delivery again now, whatever its state; the attempt joins its log."""
    row = _own(call)
    found = call.conn.execute(
        select(_d.c.id).where(_d.c.id == call.params["delivery_id"], _d.c.endpoint_id == row.id)
    ).scalar()
    if found is None:
        raise ApiError("not_found", "No such delivery for this endpoint.")
    return _send_now(call, found, trigger="retry")


def _send_now(call: Call, delivery_id: str, *, trigger: str) -> Reply:
    ctx = call.ctx
    endpoint_url = call.conn.execute(
        select(_e.c.url).join(_d, _d.c.endpoint_id == _e.c.id).where(_d.c.id == delivery_id)
    ).scalar()
    if endpoint_url == LISTEN_URL:  # svc listen takes it on its next poll
        call.conn.execute(
            update(_d)
            .where(_d.c.id == delivery_id)
            .values(status="pending", next_attempt_at=call.now, lease_token=None, lease_until=None)
        )
        row = call.conn.execute(_DELIVERIES.where(_d.c.id == delivery_id)).one()
        return Reply(_delivery_model(call.conn, row))
    lease = timedelta(seconds=ctx.settings.worker_lease_seconds)
    job = claim_one(call.conn, ctx.box, delivery_id, now=call.now, lease=lease)

    def send() -> Reply:
        deliver_job_sync(ctx, job, trigger=trigger)
        with ctx.db.read() as conn:
            row = conn.execute(_DELIVERIES.where(_d.c.id == delivery_id)).one()
            return Reply(_delivery_model(conn, row))

    return Reply(None, after_commit=send)


def _delivery_model(conn: Connection, row: Any) -> Delivery:
    a = t.webhook_attempts
    attempts = conn.execute(select(a).where(a.c.delivery_id == row.id).order_by(a.c.number)).all()
    return Delivery(
        id=row.id,
        webhook_id=row.endpoint_id,
        event_id=row.event_id,
        event_type=row.type,
        status=row.status,
        attempts=len(attempts),
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        next_attempt_at=None if row.next_attempt_at is None else as_utc(row.next_attempt_at),
        created_at=as_utc(row.created_at),
        delivered_at=None if row.delivered_at is None else as_utc(row.delivered_at),
        attempt_log=[
            DeliveryAttempt(
                number=x.number,
                started_at=as_utc(x.started_at),
                duration_ms=x.duration_ms,
                status_code=x.status_code,
                error=x.error,
                response_body=x.response_body,
                trigger=x.trigger,
            )
            for x in attempts
        ],
    )


def _own(call: Call) -> Any:
    return call.owned(endpoints.find_owned_endpoint, "webhook_id")


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/webhooks",
        handler=create,
        auth=Role.OWNER,
        idempotency="required",
        body=CreateWebhook,
        sdk=Sdk(
            "webhooks.create",
            "url: str, *, events: Sequence[str] | None = None, description: str | None = None",
            doc="""Register ``url`` (HTTPS; ``http://localhost`` outside production).

            ``events`` limits it to those event types (see :meth:`events`); ``None``: every
            event, including types added later.  Keep ``signing_secret``: it is never shown
            again.  An ``Idempotency-Key`` is always sent, so a retried create registers once.
            """,
            build="create_webhook_body",
        ),
        contract=Contract(response=WebhookEndpointCreated, status=201),
    ),
    Endpoint(
        method="GET",
        path="/webhooks",
        handler=list_all,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.list",
            doc="""The owner's endpoints in this environment, oldest first; deleted ones are
            gone.""",
            all_doc="""Every endpoint of the owner, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=WebhookEndpointList),
    ),
    Endpoint(
        method="GET",
        path="/webhooks/events",
        handler=catalog,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.events",
            doc="""The event catalog: every event type the service emits, with what causes it.""",
        ),
        contract=Contract(response=EventCatalog),
    ),
    Endpoint(
        method="PATCH",
        path="/webhooks/{webhook_id}",
        handler=patch,
        auth=Role.OWNER,
        idempotency="optional",
        body=UpdateWebhook,
        sdk=Sdk(
            "webhooks.update",
            "webhook_id: str, *, events: Sequence[str] | NotGiven | None = NOT_GIVEN, "
            "description: str | NotGiven = NOT_GIVEN, "
            "status: WebhookStatus | NotGiven = NOT_GIVEN",
            doc="""Change the fields given; a field left out keeps its value.

            ``events=None`` (sent as JSON ``null``) subscribes the endpoint to every event;
            ``description=""`` clears the description; ``status="enabled"`` re-enables an
            endpoint that was disabled (by you, or after failing deliveries).
            """,
            build="update_webhook_body",
            keep_null=True,
        ),
        contract=Contract(response=WebhookEndpoint),
    ),
    Endpoint(
        method="DELETE",
        path="/webhooks/{webhook_id}",
        handler=delete,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.delete",
            "webhook_id: str",
            doc="""Delete the endpoint: the result has ``status`` ``deleted``, its pending
            deliveries are cancelled, and later calls with its id raise
            :class:`~svc.NotFoundError`.""",
        ),
        contract=Contract(response=WebhookEndpoint),
    ),
    Endpoint(
        method="GET",
        path="/webhooks/{webhook_id}/deliveries",
        handler=deliveries,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.deliveries",
            "webhook_id: str",
            doc="""The delivery log, newest first, each with its ``attempt_log``.""",
            all_doc="""Every delivery of the endpoint, in the order of :meth:`deliveries`.""",
        ),
        contract=Contract(response=DeliveryList),
    ),
    Endpoint(
        method="POST",
        path="/webhooks/{webhook_id}/test",
        handler=test,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.test",
            "webhook_id: str",
            doc="""Send a signed sample ``payment.succeeded`` (``test: true``) now; returns its
            delivery, with the receiver's answer in ``attempt_log``.""",
        ),
        contract=Contract(response=Delivery),
    ),
    Endpoint(
        method="POST",
        path="/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
        handler=retry,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.retry",
            "webhook_id: str, delivery_id: str",
            doc="""Send one delivery again now, whatever its state; the delivery keeps its ``id``
            and the attempt joins its ``attempt_log``.""",
        ),
        contract=Contract(response=Delivery),
    ),
]

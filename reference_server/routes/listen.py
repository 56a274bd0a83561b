"""``svc listen``: a listener endpoint whose deliveries the owner's CLI long-polls for and
acknowledges, instead of the worker sending them over HTTP (the CLI forwards them to a
local receiver, as ``stripe listen`` does).  Test environment only."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import attrs
from sqlalchemy import select

from svc import ListenBatch, ListenedDelivery, WebhookEndpointCreated
from svc.bodies import AckListened, CreateListener

from ..context import ServerContext
from ..domain import webhook_endpoints as endpoints
from ..outbox import DeliveryOutcome, Job
from ..outbox.delivery import LISTEN_URL, claim_listened, leased_job, polled, record_outcomes
from ..store import tables as t
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError
from ..web.responses import Reply
from ..web.sdk import Sdk

__all__ = ["ENDPOINTS"]

_e = t.webhook_endpoints
#: The longest a poll waits for a delivery (seconds); the CLI asks for 25.
_MAX_WAIT = 30.0
#: How often a waiting poll looks for due deliveries (seconds).
_LOOK_EVERY = 0.25
_BATCH = 20


def _own_listener(call: Call) -> str:
    """The caller's listener endpoint of the path (404 for anyone else's, or for an
    endpoint that delivers over HTTP)."""
    row = call.owned(endpoints.find_owned_endpoint, "webhook_id")
    if row.url != LISTEN_URL:
        raise ApiError("not_found", "No such listener endpoint (svc listen creates them).")
    return str(row.id)


def create(call: Call) -> Reply:
    """Register a listener endpoint in Test; its signing secret is shown only here."""
    if call.environment != "test":
        raise ApiError(
            "validation_error",
            "svc listen works in the test environment only (--environment test).",
        )
    b = call.input(CreateListener)
    secret = endpoints.new_signing_secret()
    row = endpoints.create_endpoint(
        call.conn,
        owner_id=call.caller.owner_id,
        environment=call.environment,
        url=LISTEN_URL,
        events=b.events,
        description="svc listen",
        secret=secret,
        box=call.ctx.box,
        now=call.now,
    )
    model = endpoints.endpoint_model(row)
    created = WebhookEndpointCreated(**attrs.asdict(model, recurse=False), signing_secret=secret)
    return Reply(created, 201, secret=True)


def poll(call: Call) -> Reply:
    """The next due deliveries of the listener, waiting up to ``wait`` seconds for one;
    each is leased to this poll until acknowledged (or the lease expires: retried).  With
    none, the empty answer at ``wait`` is the connection's heartbeat; each poll keeps the
    listener from being swept as abandoned."""
    endpoint_id = _own_listener(call)
    try:
        wait = min(max(float(call.request.query_params.get("wait", "0")), 0.0), _MAX_WAIT)
    except ValueError:
        raise ApiError("validation_error", "wait must be a number of seconds.") from None
    ctx = call.ctx
    lease = timedelta(seconds=ctx.settings.worker_lease_seconds)

    def answer() -> Reply:  # after the commit: waiting holds no transaction
        deadline = time.monotonic() + wait
        polled(ctx.db, endpoint_id, now=ctx.now())  # alive: not swept
        while True:
            jobs = claim_listened(
                ctx.db, ctx.box, endpoint_id, now=ctx.now(), limit=_BATCH, lease=lease
            )
            if jobs or time.monotonic() >= deadline or not _listening(ctx, endpoint_id):
                now = ctx.now()
                return Reply(ListenBatch(data=[_listened(job, now) for job in jobs]))
            time.sleep(_LOOK_EVERY)

    return Reply(None, after_commit=answer)


def _listening(ctx: ServerContext, endpoint_id: str) -> bool:
    """The listener still exists (its CLI deletes it on exit; a poll still waiting ends)."""
    with ctx.db.read() as conn:
        status = conn.execute(select(_e.c.status).where(_e.c.id == endpoint_id)).scalar()
    return status == "enabled"


def _listened(job: Job, now: datetime) -> ListenedDelivery:
    event_type = str(json.loads(job.body)["type"])
    return ListenedDelivery(
        delivery_id=job.delivery_id,
        event_id=job.event_id,
        event_type=event_type,
        headers=job.signed_headers(now),
        body=job.body.decode(),
    )


def ack(call: Call) -> Reply:
    """Record what the local receiver answered: the attempt joins the delivery log and a
    failure is retried on the usual schedule."""
    endpoint_id = _own_listener(call)
    b = call.input(AckListened)
    job = leased_job(call.conn, call.ctx.box, b.delivery_id)
    if job is None or job.endpoint_id != endpoint_id:
        raise ApiError("not_found", "No delivery of this listener is waiting for that answer.")
    outcome = DeliveryOutcome(
        started_at=call.now,
        duration_ms=0,
        status_code=b.status_code,
        error=b.error
        if b.error is not None or b.status_code is None or 200 <= b.status_code < 300
        else f"receiver answered {b.status_code}",
    )
    ctx = call.ctx

    def record() -> Reply:
        record_outcomes(
            ctx.db, [(job, outcome)], settings=ctx.settings, now=ctx.now(), trigger="listen"
        )
        return Reply(ListenBatch(data=[]))

    return Reply(None, after_commit=record)


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/webhooks/listen",
        handler=create,
        auth=Role.OWNER,
        body=CreateListener,
        sdk=Sdk(
            "webhooks.listen",
            "*, events: Sequence[str] | None = None",
            build="create_listener_body",
            doc="""Register a listener endpoint (Test only) for ``svc listen``: its deliveries
            are handed to :meth:`poll` instead of being sent over HTTP.""",
        ),
        contract=Contract(response=WebhookEndpointCreated, status=201),
    ),
    Endpoint(
        method="GET",
        path="/webhooks/{webhook_id}/listen",
        handler=poll,
        auth=Role.OWNER,
        sdk=Sdk(
            "webhooks.poll",
            "webhook_id: str, *, wait: float = 0",
            doc="""The listener's next due deliveries, each with its signed headers and body,
            waiting up to ``wait`` seconds (30 at most) for one.""",
            build="listen_query",
        ),
        contract=Contract(response=ListenBatch),
    ),
    Endpoint(
        method="POST",
        path="/webhooks/{webhook_id}/listen/ack",
        handler=ack,
        auth=Role.OWNER,
        body=AckListened,
        sdk=Sdk(
            "webhooks.ack",
            "webhook_id: str, *, delivery_id: str, status_code: int | None = None, "
            "error: str | None = None",
            doc="""Record the local receiver's answer to one listened delivery.""",
        ),
        contract=Contract(response=ListenBatch),
    ),
]

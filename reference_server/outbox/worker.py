"""The delivery worker: claim due deliveries, send them, record the outcomes, repeat.

Each round also moves payouts along (``domain/payouts/progress.py``: payouts created and
followed at the processor, auto payouts started), so they progress from the database
alone and survive restarts.

It runs as a background task of ``svc-server run`` (``Settings.worker_enabled``) and alone
as ``svc-server worker``; any number may run against one database.  Sending happens outside
any database transaction, so a slow receiver never holds a lock.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import anyio
import anyio.to_thread

from ..context import ServerContext
from ..domain.payouts.progress import run_payouts
from ..outbound import OutboundError, OutboundPolicy, OutboundResponse, send, send_sync
from .delivery import DeliveryOutcome, Job, claim_due, record_outcome

__all__ = ["deliver_job", "deliver_job_sync", "policy_for", "run_worker"]

log = logging.getLogger("reference_server.outbox")


def policy_for(ctx: ServerContext) -> OutboundPolicy:
    """Production refuses private and loopback receivers and insists on HTTPS; elsewhere
    ``http://localhost`` callbacks are allowed (spec: outside production)."""
    settings = ctx.settings
    timeout = settings.webhook_timeout_seconds
    return OutboundPolicy.from_settings(
        settings,
        connect_timeout=min(5.0, timeout),
        read_timeout=timeout,
        total_timeout=timeout,
        max_response_bytes=settings.webhook_log_body_bytes,
        resolver=settings.outbound_resolver,
        user_agent="svc-webhooks/1",
    )


def _outcome(
    started: datetime, t0: float, response: OutboundResponse | None, error: str | None
) -> DeliveryOutcome:
    duration_ms = int((time.monotonic() - t0) * 1000)
    if response is None:
        return DeliveryOutcome(started_at=started, duration_ms=duration_ms, error=error)
    error = None
    if 300 <= response.status < 400:
        error = f"redirect to {response.headers.get('location', '?')} not followed"
    elif not 200 <= response.status < 300:
        error = f"receiver answered {response.status}"
    return DeliveryOutcome(
        started_at=started,
        duration_ms=duration_ms,
        status_code=response.status,
        error=error,
        response_body=response.body.decode("utf-8", "replace"),
    )


def deliver_job_sync(ctx: ServerContext, job: Job, *, trigger: str) -> DeliveryOutcome:
    """Send one claimed attempt and record it, from a worker thread (the API routes)."""
    started = ctx.now()
    t0 = time.monotonic()
    try:
        response: OutboundResponse | None = send_sync(
            "POST",
            job.url,
            headers=job.signed_headers(started),
            content=job.body,
            policy=policy_for(ctx),
        )
        outcome = _outcome(started, t0, response, None)
    except OutboundError as exc:
        outcome = _outcome(started, t0, None, str(exc))
    record_outcome(ctx.db, job, outcome, settings=ctx.settings, now=ctx.now(), trigger=trigger)
    return outcome


async def deliver_job(ctx: ServerContext, job: Job, *, trigger: str = "schedule") -> None:
    started = ctx.now()
    t0 = time.monotonic()
    try:
        response = await send(
            "POST",
            job.url,
            headers=job.signed_headers(started),
            content=job.body,
            policy=policy_for(ctx),
        )
        outcome = _outcome(started, t0, response, None)
    except OutboundError as exc:
        outcome = _outcome(started, t0, None, str(exc))
    await anyio.to_thread.run_sync(
        lambda: record_outcome(
            ctx.db, job, outcome, settings=ctx.settings, now=ctx.now(), trigger=trigger
        )
    )


async def _payouts(ctx: ServerContext) -> bool:
    """Advance payouts and start auto payouts (``domain/payouts/progress.py``); ``True``
    when that recorded events.  A failure is logged and the next round tries again."""
    try:
        return await anyio.to_thread.run_sync(lambda: run_payouts(ctx.db, ctx.settings, ctx.now))
    except Exception:
        log.exception("advancing payouts failed; trying again")
        return False


async def run_worker(ctx: ServerContext, *, stop: anyio.Event | None = None) -> None:
    """Deliver until cancelled (or ``stop`` is set).  Errors are logged and retried: the
    outbox keeps every delivery until it succeeds or its schedule is exhausted."""
    settings = ctx.settings
    lease = timedelta(seconds=settings.worker_lease_seconds)
    slots = anyio.CapacityLimiter(settings.worker_concurrency)

    async def one(job: Job) -> None:
        async with slots:
            try:
                await deliver_job(ctx, job)
            except Exception:
                log.exception(
                    "delivery %s failed to record; its lease will expire", job.delivery_id
                )

    while stop is None or not stop.is_set():
        queued = await _payouts(ctx)
        try:
            jobs = await anyio.to_thread.run_sync(
                lambda: claim_due(
                    ctx.db, ctx.box, now=ctx.now(), limit=settings.worker_batch_size, lease=lease
                )
            )
        except Exception:
            log.exception("claiming deliveries failed; trying again")
            jobs = []
        if jobs:
            async with anyio.create_task_group() as tasks:
                for job in jobs:
                    tasks.start_soon(one, job)
            continue
        if queued:  # payouts recorded events: their deliveries are due now
            continue
        with anyio.move_on_after(settings.worker_poll_seconds):
            await ctx.wakeup.wait()
        ctx.reset_wakeup()

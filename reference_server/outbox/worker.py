"""The delivery worker: a pipeline that claims due deliveries, sends them, records the
outcomes -- all three at once.

- The *claimer* takes up to ``worker_batch_size`` due deliveries per transaction and
  hands them to the senders through a buffer of the same size; it claims the next batch
  as soon as there is room, while earlier ones are still being sent.  With nothing due it
  sleeps until woken (a commit in this process, or PostgreSQL's ``NOTIFY``:
  ``wakeup.py``) or ``worker_poll_seconds`` pass.
- ``worker_concurrency`` *senders* each send one delivery at a time through the SSRF-safe
  client, over kept-alive connections (one small pool per checked name and address).
- The *recorder* writes every outcome that finished while it wrote the previous ones, in
  one transaction (``record_outcomes``).

Every claimed delivery carries a lease, so nothing another worker holds is sent twice at
once; a worker that dies leaves leases that expire (at least once).  Each round also moves
payouts along (``domain/payouts/progress.py``: payouts created and followed at the
processor, auto payouts started), so they progress from the database alone and survive
restarts.

It runs as a background task of ``svc-server run`` (``Settings.worker_enabled``) and alone
as ``svc-server worker``; any number may run against one database.  Sending happens outside
any database transaction, so a slow receiver never holds a lock.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime, timedelta

import anyio
import anyio.to_thread

from ..context import ServerContext
from ..domain.payouts.progress import run_payouts
from ..domain.refunds import advance_refunds
from ..outbound import (
    AsyncPinnedClients,
    OutboundError,
    OutboundPolicy,
    OutboundResponse,
    send,
    send_sync,
)
from ..telemetry import span
from .delivery import DeliveryOutcome, Job, claim_due, record_outcomes
from .wakeup import listen

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
    record_outcomes(ctx.db, [(job, outcome)], settings=ctx.settings, now=ctx.now(), trigger=trigger)
    return outcome


async def deliver_job(
    ctx: ServerContext,
    job: Job,
    *,
    policy: OutboundPolicy | None = None,
    pool: AsyncPinnedClients | None = None,
) -> DeliveryOutcome:
    """Send one claimed attempt (not recorded: the worker records outcomes in batches),
    a trace of its own (``webhook delivery``) when tracing, naming the request that caused
    the event (``svc.origin_request_id``) and linked to that request's span."""
    started = ctx.now()
    t0 = time.monotonic()
    names = {
        "svc.delivery_id": job.delivery_id,
        "svc.event_id": job.event_id,
        "svc.attempt": job.number,
        "svc.origin_request_id": job.origin_request_id,
    }
    with span("webhook delivery", link=job.origin_traceparent, **names):
        try:
            response = await send(
                "POST",
                job.url,
                headers=job.signed_headers(started),
                content=job.body,
                policy=policy or policy_for(ctx),
                pool=pool,
            )
            return _outcome(started, t0, response, None)
        except OutboundError as exc:
            return _outcome(started, t0, None, str(exc))


async def _payouts(ctx: ServerContext) -> bool:
    """Advance payouts and start auto payouts (``domain/payouts/progress.py``); ``True``
    when that recorded events.  A failure is logged and the next round tries again."""
    try:
        queued = await anyio.to_thread.run_sync(lambda: run_payouts(ctx.db, ctx.settings, ctx.now))
    except Exception:
        log.exception("advancing payouts failed; trying again")
        queued = False
    try:  # pending refunds, on chain or by card (domain/refunds.py): outflows like payouts
        return await advance_refunds(ctx) or queued
    except Exception:
        log.exception("advancing refunds failed; trying again")
        return queued


#: Kept-alive clients per sender (each one name and address); the least recently used
#: beyond this are closed.
_CLIENTS_PER_SENDER = 8
#: The recorder waits at most this long (seconds) for more outcomes to write together
#: (up to ``worker_batch_size``): fewer, larger transactions, each one a hand-off to a
#: thread that must win the GIL back from the senders.  Delivery itself is not delayed;
#: only the delivery log is, by as much.
_RECORD_GATHER_SECONDS = 0.05


class _Recorder:
    """Collects finished attempts; writes all that are waiting in one transaction."""

    def __init__(self, ctx: ServerContext) -> None:
        self._ctx = ctx
        self._done: list[tuple[Job, DeliveryOutcome]] = []
        self._ready = anyio.Event()

    def add(self, job: Job, outcome: DeliveryOutcome) -> None:
        self._done.append((job, outcome))
        self._ready.set()

    async def run(self) -> None:
        batch = self._ctx.settings.worker_batch_size
        while True:
            await self._ready.wait()
            with anyio.move_on_after(_RECORD_GATHER_SECONDS):
                while len(self._done) < batch:
                    self._ready = anyio.Event()
                    await self._ready.wait()
            self._ready = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        done, self._done = self._done, []
        if done:
            await anyio.to_thread.run_sync(lambda: self._write(done))

    def _write(self, done: list[tuple[Job, DeliveryOutcome]]) -> None:
        try:
            self._record(done)
            return
        except Exception:
            log.exception("recording %d deliveries failed; recording them one by one", len(done))
        for job, outcome in done:
            try:
                self._record([(job, outcome)])
            except Exception:
                log.exception(
                    "delivery %s failed to record; its lease will expire", job.delivery_id
                )

    def _record(self, done: list[tuple[Job, DeliveryOutcome]]) -> None:
        ctx = self._ctx
        record_outcomes(ctx.db, done, settings=ctx.settings, now=ctx.now(), trigger="schedule")


async def _reconciler(ctx: ServerContext) -> None:
    """Reconcile the books with the chain every ``reconcile_interval_seconds``
    (``reconcile.reconcile_due``: drift is recorded and logged at WARNING).  Several
    workers share the interval through the runs they record."""
    from ..reconcile import reconcile_due

    interval = ctx.settings.reconcile_interval_seconds
    while True:
        # First a pause: a process that starts and stops at once (a deploy's check, a
        # test) reads no chain; then a look each minute at most for a run that is due.
        await anyio.sleep(min(interval, 60.0))
        try:
            await anyio.to_thread.run_sync(lambda: reconcile_due(ctx))
        except Exception:
            log.exception("reconciling the books with the chain failed; trying again")


class _Pipeline:
    """One worker's claimer, senders and recorder (see the module docstring)."""

    def __init__(self, ctx: ServerContext, stop: anyio.Event | None) -> None:
        settings = ctx.settings
        self.ctx = ctx
        self.stop = stop
        self.lease = timedelta(seconds=settings.worker_lease_seconds)
        self.policy = policy_for(ctx)
        #: One pool per sender, of one connection per checked name and address: a sender
        #: sends one delivery at a time, and httpcore looks at every connection of a pool
        #: on each request (a cost that grows with the pool).
        self.pools = [
            AsyncPinnedClients(size=_CLIENTS_PER_SENDER, connections=1)
            for _ in range(settings.worker_concurrency)
        ]
        self.recorder = _Recorder(ctx)
        self.to_send, self.to_take = anyio.create_memory_object_stream[Job](
            settings.worker_batch_size
        )

    async def sender(self, pool: AsyncPinnedClients) -> None:
        async for job in self.to_take:
            try:
                outcome = await deliver_job(self.ctx, job, policy=self.policy, pool=pool)
            except Exception:
                log.exception("delivery %s failed; its lease will expire", job.delivery_id)
                continue
            self.recorder.add(job, outcome)

    async def claim(self) -> list[Job]:
        ctx = self.ctx
        limit = ctx.settings.worker_batch_size
        try:
            return await anyio.to_thread.run_sync(
                lambda: claim_due(ctx.db, ctx.box, now=ctx.now(), limit=limit, lease=self.lease)
            )
        except Exception:
            log.exception("claiming deliveries failed; trying again")
            return []

    async def claimer(self) -> None:
        """Claim while earlier batches are still being sent (the buffer bounds how far
        ahead); when nothing is due, sleep until woken or the poll interval passes."""
        ctx, poll = self.ctx, self.ctx.settings.worker_poll_seconds
        async with self.to_send:
            payouts_at = -math.inf
            queued = False
            while self.stop is None or not self.stop.is_set():
                if time.monotonic() - payouts_at >= poll:
                    payouts_at = time.monotonic()
                    queued = await _payouts(ctx)
                jobs = await self.claim()
                for job in jobs:
                    await self.to_send.send(job)
                if jobs or queued:  # more may be due now
                    queued = False
                    continue
                with anyio.move_on_after(poll):
                    await ctx.wakeup.wait()
                ctx.reset_wakeup()
                payouts_at = -math.inf  # woken or idle: a round of payouts, as before

    async def _wake_on_stop(self, stop: anyio.Event) -> None:
        """A stop must not wait for the claimer's next poll (which may be an hour away)."""
        await stop.wait()
        self.ctx.wakeup.set()

    async def run(self) -> None:
        ctx = self.ctx
        try:
            async with anyio.create_task_group() as background:
                background.start_soon(listen, ctx.db, lambda: ctx.wakeup.set())
                if self.stop is not None:
                    background.start_soon(self._wake_on_stop, self.stop)
                background.start_soon(self.recorder.run)
                if ctx.settings.reconcile_interval_seconds:
                    background.start_soon(_reconciler, ctx)
                async with self.to_take, anyio.create_task_group() as pipeline:
                    for pool in self.pools:
                        pipeline.start_soon(self.sender, pool)
                    pipeline.start_soon(self.claimer)
                background.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self.recorder.flush()  # what was sent is recorded, even on the way out
                for pool in self.pools:
                    await pool.aclose()


async def run_worker(ctx: ServerContext, *, stop: anyio.Event | None = None) -> None:
    """Deliver until cancelled (or ``stop`` is set: what was claimed is sent and recorded
    first).  Errors are logged and retried: the outbox keeps every delivery until it
    succeeds or its schedule is exhausted."""
    await _Pipeline(ctx, stop).run()

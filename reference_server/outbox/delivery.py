"""Claiming, signing and recording webhook deliveries.

Claiming is the only way to send: a worker (or the retry/test route) takes a due delivery
by writing a fresh lease token and expiry in one transaction — with ``FOR UPDATE SKIP
LOCKED`` on PostgreSQL so concurrent workers take different rows, and under SQLite's single
writer lock otherwise.  The attempt number is assigned at claim time.  While the lease
runs nobody else can claim the row, so one attempt is never sent twice at once; if the
worker dies, the lease expires and another worker sends the next attempt (at least once).
Only the lease holder may record the outcome.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, func, insert, or_, select, update

from svc import webhooks

from .. import metrics
from ..crypto import SecretBox
from ..domain.errors import DomainError
from ..domain.webhook_endpoints import LISTEN_URL, set_status
from ..settings import Settings
from ..store import Database
from ..store import tables as t
from ..timeutil import as_utc

__all__ = [
    "LISTEN_URL",
    "DeliveryOutcome",
    "Job",
    "claim_due",
    "claim_listened",
    "claim_one",
    "drop_abandoned_listeners",
    "event_body",
    "leased_job",
    "next_delay",
    "polled",
    "record_outcomes",
]

_d = t.webhook_deliveries
_e = t.webhook_endpoints
_ev = t.events


@attrs.frozen(kw_only=True)
class Job:
    """A claimed delivery: everything needed to send one attempt, and to record it."""

    delivery_id: str
    lease_token: str
    number: int
    endpoint_id: str
    url: str
    secret: str = attrs.field(repr=False)
    event_id: str
    body: bytes
    #: The request that caused the event, and its span's ``traceparent`` (when traced).
    origin_request_id: str | None = None
    origin_traceparent: str | None = None

    def signed_headers(self, now: datetime) -> dict[str, str]:
        """Signed at send time: a retry carries a fresh timestamp (receivers reject
        timestamps older than 300 s) over the same body and the same webhook id."""
        headers = webhooks.headers(
            self.secret, webhook_id=self.event_id, timestamp=int(now.timestamp()), body=self.body
        )
        headers["Content-Type"] = "application/json"
        headers["User-Agent"] = "svc-webhooks/1"
        return headers


@attrs.frozen(kw_only=True)
class DeliveryOutcome:
    started_at: datetime
    duration_ms: int
    status_code: int | None = None
    error: str | None = None
    response_body: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def event_body(event_id: str, event_type: str, created_at: datetime, data: Any) -> bytes:
    """The delivered JSON: the spec's envelope, byte-identical on every attempt."""
    envelope = {
        "id": event_id,
        "type": event_type,
        "created_at": as_utc(created_at).isoformat().replace("+00:00", "Z"),
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


def next_delay(settings: Settings, failures: int, rng: random.Random | None = None) -> float | None:
    """Seconds until the retry after ``failures`` failed attempts; ``None`` = give up."""
    schedule = settings.webhook_retry_schedule
    if failures > len(schedule):
        return None
    base = schedule[failures - 1]
    jitter = settings.webhook_retry_jitter
    return base * (1 + (rng or random).uniform(-jitter, jitter))


def _lease(conn: Connection, ids: Sequence[str], now: datetime, lease: timedelta) -> dict[str, str]:
    """One statement for the whole claim: the rows share a lease token (each row's own
    token would buy nothing: the token only tells a lease holder from the next one)."""
    token = secrets.token_hex(8)
    conn.execute(
        update(_d)
        .where(_d.c.id.in_(list(ids)))
        .values(lease_token=token, lease_until=now + lease, attempts=_d.c.attempts + 1)
    )
    return dict.fromkeys(ids, token)


def _jobs(conn: Connection, tokens: dict[str, str], box: SecretBox) -> list[Job]:
    rows = conn.execute(
        select(
            _d.c.id,
            _d.c.attempts,
            _d.c.endpoint_id,
            _e.c.url,
            _e.c.secret_sealed,
            _ev.c.id.label("event_id"),
            _ev.c.type,
            _ev.c.created_at,
            _ev.c.data,
            _ev.c.request_id.label("origin_request_id"),
            _ev.c.traceparent,
        )
        .join(_e, _e.c.id == _d.c.endpoint_id)
        .join(_ev, _ev.c.id == _d.c.event_id)
        .where(_d.c.id.in_(list(tokens)))
        .order_by(_d.c.next_attempt_at)
    ).all()
    secrets_by_endpoint: dict[str, str] = {}  # unsealing costs; a claim is often one endpoint
    jobs = []
    for row in rows:
        secret = secrets_by_endpoint.get(row.endpoint_id)
        if secret is None:
            secret = secrets_by_endpoint[row.endpoint_id] = box.open(row.secret_sealed)
        jobs.append(
            Job(
                delivery_id=row.id,
                lease_token=tokens[row.id],
                number=row.attempts,
                endpoint_id=row.endpoint_id,
                url=row.url,
                secret=secret,
                event_id=row.event_id,
                body=event_body(row.event_id, row.type, row.created_at, row.data),
                origin_request_id=row.origin_request_id,
                origin_traceparent=row.traceparent,
            )
        )
    return jobs


def claim_due(
    db: Database, box: SecretBox, *, now: datetime, limit: int, lease: timedelta
) -> list[Job]:
    """Claim up to ``limit`` deliveries whose attempt is due, oldest first."""
    with db.write() as conn:
        query = (
            select(_d.c.id)
            .join(_e, _e.c.id == _d.c.endpoint_id)
            .where(
                _d.c.status == "pending",
                _d.c.next_attempt_at <= now,
                or_(_d.c.lease_until.is_(None), _d.c.lease_until < now),
                _e.c.status == "enabled",
                _e.c.url != LISTEN_URL,
            )
            .order_by(_d.c.next_attempt_at)
            .limit(limit)
        )
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True, of=_d)
        ids = conn.execute(query).scalars().all()
        if not ids:
            return []
        return _jobs(conn, _lease(conn, ids, now, lease), box)


def claim_listened(
    db: Database, box: SecretBox, endpoint_id: str, *, now: datetime, limit: int, lease: timedelta
) -> list[Job]:
    """Claim the due deliveries of one listener endpoint (the caller checked it is the
    owner's), as the worker claims the others: leased, so an attempt is handed out once."""
    with db.write() as conn:
        query = (
            select(_d.c.id)
            .where(
                _d.c.endpoint_id == endpoint_id,
                _d.c.status == "pending",
                _d.c.next_attempt_at <= now,
                or_(_d.c.lease_until.is_(None), _d.c.lease_until < now),
            )
            .order_by(_d.c.next_attempt_at)
            .limit(limit)
        )
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        ids = conn.execute(query).scalars().all()
        if not ids:
            return []
        return _jobs(conn, _lease(conn, ids, now, lease), box)


#: A listener endpoint not polled for this long is abandoned (its ``svc listen`` died
#: without deleting it): a running CLI polls at least every 25 seconds, its empty answers
#: a heartbeat, and retries a lost connection far more often than this.
LISTENER_ABANDONED_AFTER = timedelta(minutes=10)


def drop_abandoned_listeners(db: Database, *, now: datetime) -> int:
    """Delete the listener endpoints nobody polled (housekeeping) for
    ``LISTENER_ABANDONED_AFTER`` (since they were made, if never), whether or not a
    delivery waits for them.  Their pending deliveries are cancelled, as a deleted
    endpoint's are; returns how many."""
    before = now - LISTENER_ABANDONED_AFTER
    with db.write() as conn:
        ids = (
            conn.execute(
                select(_e.c.id).where(
                    _e.c.url == LISTEN_URL,
                    _e.c.status != "deleted",
                    func.coalesce(_e.c.listened_at, _e.c.created_at) < before,
                )
            )
            .scalars()
            .all()
        )
        for endpoint_id in ids:
            set_status(conn, endpoint_id, "deleted")
            conn.execute(
                update(_d)
                .where(_d.c.endpoint_id == endpoint_id, _d.c.status == "pending")
                .values(status="cancelled", next_attempt_at=None)
            )
    return len(ids)


def polled(db: Database, endpoint_id: str, *, now: datetime) -> None:
    """A listener's poll: it is alive (:func:`drop_abandoned_listeners`)."""
    with db.write() as conn:
        conn.execute(update(_e).where(_e.c.id == endpoint_id).values(listened_at=now))


def leased_job(conn: Connection, box: SecretBox, delivery_id: str) -> Job | None:
    """The job a listener was handed, to record its acknowledgement; ``None`` when the
    delivery holds no lease (already acknowledged, or the lease expired and was retaken)."""
    row = conn.execute(
        select(_d.c.lease_token).where(_d.c.id == delivery_id, _d.c.lease_token.is_not(None))
    ).first()
    if row is None:
        return None
    return _jobs(conn, {delivery_id: row.lease_token}, box)[0]


def claim_one(
    conn: Connection, box: SecretBox, delivery_id: str, *, now: datetime, lease: timedelta
) -> Job:
    """Claim one delivery now, whatever its schedule (the retry and test routes)."""
    query = select(_d).where(_d.c.id == delivery_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).one()
    if row.lease_until is not None and as_utc(row.lease_until) > now:
        raise DomainError(
            "conflict",
            "This delivery is being sent right now; look at the delivery log in a moment.",
            retry_after_seconds=1,
        )
    if row.status == "cancelled":
        raise DomainError("conflict", "This delivery was cancelled with its endpoint.")
    return _jobs(conn, _lease(conn, [delivery_id], now, lease), box)[0]


def _attempt_row(job: Job, outcome: DeliveryOutcome, trigger: str) -> dict[str, Any]:
    return {
        "delivery_id": job.delivery_id,
        "number": job.number,
        "started_at": outcome.started_at,
        "duration_ms": outcome.duration_ms,
        "status_code": outcome.status_code,
        "error": None if outcome.error is None else outcome.error[:500],
        "response_body": outcome.response_body,
        "trigger": trigger,
    }


def record_outcomes(
    db: Database,
    done: Sequence[tuple[Job, DeliveryOutcome]],
    *,
    settings: Settings,
    now: datetime,
    trigger: str,
) -> None:
    """Log the attempts; then, where the lease is still ours, schedule what comes next.
    In one transaction: the worker records what finished while the last batch was being
    written.  Successes (nearly all of them)
    take one statement each for the log, the deliveries of each claim (only rows whose
    lease token is still that claim's change) and their endpoints' health; failures go
    one by one, as their schedules differ."""
    if not done:
        return
    outcomes: list[str] = []
    with db.write() as conn:
        conn.execute(
            insert(t.webhook_attempts),
            [_attempt_row(job, outcome, trigger) for job, outcome in done],
        )
        # grouped by lease token (a claim's rows share one) and status: one statement each
        succeeded: dict[tuple[str, int | None], list[Job]] = {}
        for job, outcome in done:
            if outcome.succeeded:
                succeeded.setdefault((job.lease_token, outcome.status_code), []).append(job)
                outcomes.append("succeeded")
            else:
                outcomes.append(_record_failure(conn, job, outcome, settings, now))
        for (token, status_code), jobs in succeeded.items():
            conn.execute(
                update(_d)
                .where(_d.c.id.in_([job.delivery_id for job in jobs]), _d.c.lease_token == token)
                .values(
                    lease_token=None,
                    lease_until=None,
                    last_status_code=status_code,
                    last_error=None,
                    status="succeeded",
                    delivered_at=now,
                    next_attempt_at=None,
                )
            )
        # The receivers answered 2xx: their endpoints are healthy, whoever holds the lease
        # now.  Only rows that were failing are written (and locked).
        healthy = sorted({job.endpoint_id for jobs in succeeded.values() for job in jobs})
        if healthy:
            conn.execute(
                update(_e)
                .where(_e.c.id.in_(healthy), _e.c.failing_since.is_not(None))
                .values(failing_since=None)
            )
    for counted in outcomes:  # committed: counted once
        metrics.webhook_attempt(counted)


def _record_failure(
    conn: Connection, job: Job, outcome: DeliveryOutcome, settings: Settings, now: datetime
) -> str:
    """Schedules the next attempt or gives up; returns which (``retrying``, ``failed``)."""
    values: dict[str, Any] = {
        "lease_token": None,
        "lease_until": None,
        "last_status_code": outcome.status_code,
        "last_error": None if outcome.error is None else outcome.error[:500],
    }
    delay = next_delay(settings, job.number)
    if delay is None:
        values.update(status="failed", next_attempt_at=None)
    else:
        values.update(status="pending", next_attempt_at=now + timedelta(seconds=delay))
    still_ours = conn.execute(
        update(_d)
        .where(_d.c.id == job.delivery_id, _d.c.lease_token == job.lease_token)
        .values(**values)
    ).rowcount
    if still_ours:
        _track_failing_endpoint(conn, job.endpoint_id, settings, now)
    return "failed" if delay is None else "retrying"


def _track_failing_endpoint(
    conn: Connection, endpoint_id: str, settings: Settings, now: datetime
) -> None:
    """A delivery failed: the endpoint is failing from now, or disabled if for too long."""
    failing_since = conn.execute(select(_e.c.failing_since).where(_e.c.id == endpoint_id)).scalar()
    if failing_since is None:
        conn.execute(update(_e).where(_e.c.id == endpoint_id).values(failing_since=now))
        return
    if (now - as_utc(failing_since)).total_seconds() >= settings.webhook_disable_after_seconds:
        set_status(
            conn,
            endpoint_id,
            "disabled",
            reason=f"every delivery failed since {as_utc(failing_since).isoformat()}; "
            "fix the receiver, then re-enable the endpoint",
        )

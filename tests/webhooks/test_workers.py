"""Outbox workers as separate processes: several at once deliver each attempt once; one
killed with SIGKILL mid-delivery loses nothing once another takes over; a commit wakes an
idle one long before its next poll (NOTIFY on PostgreSQL, the commit counter on SQLite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select

import svc
from reference_server.store import tables as t

from ..support import LiveServer, new_account, until
from .receiver import Receiver


def start_worker(
    database_url: str, lease: float = 2.0, poll: float = 0.05
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SVC_DATABASE_URL": database_url,
        "SVC_WORKER_LEASE_SECONDS": str(lease),
        "SVC_WORKER_POLL_SECONDS": str(poll),
        "SVC_WEBHOOK_RETRY_SCHEDULE": "0.2,0.2,0.2",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "reference_server", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def emit_events(live: LiveServer, receiver: Receiver, count: int) -> set[str]:
    """Register an endpoint and cause ``count`` events; return their ids."""
    acct = new_account(live.url)
    owner = svc.Client(base_url=live.url, owner_jwt=acct.owner_jwt, environment="test")
    owner.webhooks.create(receiver.url, events=["funding.paid"])
    for _ in range(count):
        owner.wallet_keys.fund(acct.wallet_key_id, "0.01")
    with live.ctx.db.read() as conn:
        ids = conn.execute(
            select(t.events.c.id).where(
                t.events.c.owner_id == acct.owner_id, t.events.c.type == "funding.paid"
            )
        ).scalars()
        return set(ids)


def received_ids(receiver: Receiver) -> list[str]:
    return [json.loads(r.body)["id"] for r in list(receiver.received)]


def wait_for_all(receiver: Receiver, ids: set[str], timeout: float = 60) -> None:
    until(lambda: ids <= set(received_ids(receiver)), "events missing", seconds=timeout)


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        proc.wait(timeout=20)


def test_a_worker_killed_mid_delivery_loses_nothing(
    make_server: Any, database_url: str, receiver: Receiver
) -> None:
    live = make_server(worker_enabled=False)
    ids = emit_events(live, receiver, 40)
    receiver.delay = 0.05  # deliveries are in flight when the kill lands
    first = start_worker(database_url)
    try:
        deadline = time.monotonic() + 30
        while len(receiver.received) < 8:
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert not ids <= set(received_ids(receiver)), "killed too late to test anything"
        second = start_worker(database_url)
        try:
            wait_for_all(receiver, ids)
            # a delivery the killed worker sent but never recorded is sent again once its
            # lease expires (at least once): wait for every row to say so
            _wait_all_succeeded(live, ids)
        finally:
            stop(second)
    finally:
        stop(first)


def test_several_workers_deliver_each_event_once(
    make_server: Any, database_url: str, receiver: Receiver
) -> None:
    live = make_server(worker_enabled=False)
    ids = emit_events(live, receiver, 60)
    receiver.delay = 0.01
    workers = [start_worker(database_url, lease=30) for _ in range(3)]
    try:
        wait_for_all(receiver, ids)
        _wait_all_succeeded(live, ids)
    finally:
        stop(*workers)
    counts = Counter(received_ids(receiver))
    assert set(counts) == ids and set(counts.values()) == {1}, counts.most_common(3)


def test_a_commit_wakes_a_standalone_worker(
    make_server: Any, database_url: str, receiver: Receiver
) -> None:
    """The worker polls once an hour here: only the commit can wake it in time (PostgreSQL's
    NOTIFY; SQLite's commit counter, ``PRAGMA data_version``, read by the worker)."""
    live = make_server(worker_enabled=False)
    worker = start_worker(database_url, poll=3600)
    try:
        first = emit_events(live, receiver, 1)
        wait_for_all(receiver, first)  # the worker is up; it claimed, and sleeps now
        _wait_all_succeeded(live, first)
        time.sleep(0.2)
        later = emit_events(live, receiver, 2)
        wait_for_all(receiver, later, timeout=20)
    finally:
        stop(worker)


def _wait_all_succeeded(live: LiveServer, ids: set[str]) -> None:
    d = t.webhook_deliveries

    def all_succeeded() -> bool:
        with live.ctx.db.read() as conn:
            rows = conn.execute(select(d.c.event_id, d.c.status).where(d.c.event_id.in_(ids)))
            got = rows.all()
        return {r.event_id for r in got} == ids and {r.status for r in got} == {"succeeded"}

    until(all_succeeded, "not every delivery succeeded", seconds=30)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_worker_stops_gracefully_on_a_signal_even_started_in_the_background(
    database_url: str, sig: signal.Signals
) -> None:
    """A shell starts background jobs with SIGINT ignored, and orchestrators send SIGTERM:
    neither may leave a worker running (it would be killed, its claims left to lapse)."""
    # Polling once an hour: the stop itself must wake the worker.
    env = {**os.environ, "SVC_DATABASE_URL": database_url, "SVC_WORKER_POLL_SECONDS": "3600"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert worker.stdout is not None
        assert b"outbox worker running" in worker.stdout.readline() + worker.stdout.readline()
        time.sleep(0.3)
        worker.send_signal(sig)
        assert worker.wait(timeout=20) == 0
        assert b"outbox worker stopped" in worker.stdout.read()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

"""``svc listen``: the CLI (a real subprocess) long-polls a real server for a listener
endpoint's deliveries, forwards them to a real loopback receiver, and acknowledges them."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import IO

import pytest
from sqlalchemy import select

import svc
from reference_server.outbox.delivery import LISTENER_ABANDONED_AFTER, drop_abandoned_listeners
from reference_server.store import tables as t
from svc import webhooks

from ..money.helpers import market
from ..support import LiveServer, new_account, until
from .receiver import Receiver


class Cli:
    """``svc listen`` as a subprocess, its stdout read line by line."""

    def __init__(self, live: LiveServer, owner_jwt: str, forward_to: str, *extra: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for name in ("SVC_OWNER_JWT", "SVC_SELLER_KEY", "SVC_WALLET_KEY", "SVC_ENVIRONMENT"):
            env.pop(name, None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "svc.cli",
                "--base-url",
                live.url,
                "--owner-jwt",
                owner_jwt,
                *extra,
                "listen",
                "--forward-to",
                forward_to,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def line(self, timeout: float = 30) -> str:
        return self.lines.get(timeout=timeout)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture
def clis() -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        if cli.proc.poll() is None:
            cli.proc.kill()
            cli.proc.wait()


def _secret(ready: str) -> tuple[str, str]:
    assert ready.startswith("Ready! Your webhook signing secret is whsec_"), ready
    secret, endpoint = ready.removeprefix("Ready! Your webhook signing secret is ").split()
    return secret, endpoint.strip("()")


def _endpoint_status(live: LiveServer, endpoint_id: str) -> str:
    e = t.webhook_endpoints
    with live.ctx.db.read() as conn:
        return str(conn.execute(select(e.c.status).where(e.c.id == endpoint_id)).scalar_one())


def test_listen_forwards_a_payment_verified_with_the_printed_secret(
    server: LiveServer, receiver: Receiver, clis: list[Cli]
) -> None:
    m = market(server)
    cli = Cli(server, m.seller_owner_jwt, receiver.url, "--environment", "test")
    clis.append(cli)
    secret, endpoint_id = _secret(cli.line())
    paid = m.agent.pay(resource_id=m.resource.id)

    line = cli.line()
    [got] = receiver.wait_for(1)
    event = webhooks.verify(secret, got.body, got.headers)  # nothing re-signed
    assert event.type == "payment.succeeded"
    assert event.data.receipt_id == paid.receipt_id  # type: ignore[union-attr]
    assert f"payment.succeeded  {event.id}  -> [200]" in line
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    [delivery] = until(
        lambda: [d for d in owner.webhooks.deliveries(endpoint_id).data if d.status == "succeeded"]
    )  # the CLI acknowledges after printing
    assert delivery.attempt_log[0].trigger == "listen"

    assert cli.stop() == 0
    assert _endpoint_status(server, endpoint_id) == "deleted"
    with pytest.raises(svc.NotFoundError):
        owner.webhooks.deliveries(endpoint_id)


def test_a_failing_local_receiver_is_retried_until_it_answers(
    server: LiveServer, receiver: Receiver, clis: list[Cli]
) -> None:
    receiver.statuses = [500]
    m = market(server)
    cli = Cli(server, m.seller_owner_jwt, receiver.url, "--environment", "test")
    clis.append(cli)
    secret, endpoint_id = _secret(cli.line())
    m.agent.pay(resource_id=m.resource.id)

    assert cli.line().endswith("-> [500]")
    assert cli.line().endswith("-> [200]")  # the retry, on a later poll
    first, second = receiver.wait_for(2)
    assert first.body == second.body
    webhooks.verify(secret, second.body, second.headers)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    [delivery] = until(
        lambda: [d for d in owner.webhooks.deliveries(endpoint_id).data if d.status == "succeeded"]
    )  # the CLI acknowledges after printing
    assert [a.status_code for a in delivery.attempt_log] == [500, 200]
    assert cli.stop() == 0


def test_the_worker_never_sends_a_listeners_deliveries(server: LiveServer) -> None:
    m = market(server)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    listener = owner.webhooks.listen(events=["payment.succeeded"])
    m.agent.pay(resource_id=m.resource.id)
    [delivery] = until(lambda: owner.webhooks.deliveries(listener.id).data)
    assert delivery.attempts == 0 and delivery.status == "pending"
    [handed] = owner.webhooks.poll(listener.id, wait=5).data
    assert handed.delivery_id == delivery.id
    owner.webhooks.ack(listener.id, delivery_id=handed.delivery_id, status_code=204)
    with pytest.raises(svc.NotFoundError):  # acknowledged once
        owner.webhooks.ack(listener.id, delivery_id=handed.delivery_id, status_code=204)


def test_another_owner_cannot_listen_or_ack(server: LiveServer) -> None:
    m = market(server)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    listener = owner.webhooks.listen()
    m.agent.pay(resource_id=m.resource.id)
    other = new_account(server.url)
    stranger = svc.Client(base_url=server.url, owner_jwt=other.owner_jwt, environment="test")
    with pytest.raises(svc.NotFoundError):
        stranger.webhooks.poll(listener.id)
    [handed] = until(lambda: owner.webhooks.poll(listener.id).data)
    with pytest.raises(svc.NotFoundError):
        stranger.webhooks.ack(listener.id, delivery_id=handed.delivery_id, status_code=200)
    # an ordinary endpoint cannot be listened on either
    plain = owner.webhooks.create("http://localhost:9/hooks")
    with pytest.raises(svc.NotFoundError):
        owner.webhooks.poll(plain.id)


def test_live_is_refused(server: LiveServer, clis: list[Cli]) -> None:
    acct = new_account(server.url)
    live_owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="live")
    with pytest.raises(svc.APIError) as refused:
        live_owner.webhooks.listen()
    assert refused.value.status == 422 and "test environment only" in refused.value.message
    cli = Cli(server, acct.owner_jwt, "http://localhost:9/hooks")  # live by default
    clis.append(cli)
    assert cli.proc.wait(timeout=30) == 1
    assert cli.proc.stderr is not None
    assert "test environment only" in cli.proc.stderr.read()


def test_an_abandoned_listener_is_deleted_by_housekeeping(server: LiveServer) -> None:
    m = market(server)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    idle = owner.webhooks.listen(events=["resource.updated"])  # nothing for it: kept
    abandoned = owner.webhooks.listen()
    m.agent.pay(resource_id=m.resource.id)
    until(lambda: owner.webhooks.deliveries(abandoned.id).data)
    later = server.ctx.now() + LISTENER_ABANDONED_AFTER + timedelta(minutes=1)
    assert drop_abandoned_listeners(server.ctx.db, now=server.ctx.now()) == 0  # not yet
    assert drop_abandoned_listeners(server.ctx.db, now=later) == 1
    assert _endpoint_status(server, abandoned.id) == "deleted"
    assert _endpoint_status(server, idle.id) == "enabled"
    d = t.webhook_deliveries
    with server.ctx.db.read() as conn:
        statuses = conn.execute(select(d.c.status).where(d.c.endpoint_id == abandoned.id))
        assert set(statuses.scalars()) == {"cancelled"}


def test_a_listeners_test_send_waits_for_the_listener(server: LiveServer) -> None:
    acct = new_account(server.url)
    owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="test")
    listener = owner.webhooks.listen()
    queued = owner.webhooks.test(listener.id)
    assert queued.status == "pending" and queued.attempts == 0  # not sent over HTTP
    [handed] = owner.webhooks.poll(listener.id, wait=5).data
    assert handed.delivery_id == queued.id and handed.event_type == "payment.succeeded"
    owner.webhooks.ack(listener.id, delivery_id=queued.id, status_code=500)
    again = owner.webhooks.retry(listener.id, queued.id)  # due now, for the next poll
    assert again.status == "pending" and [a.status_code for a in again.attempt_log] == [500]
    [handed] = owner.webhooks.poll(listener.id, wait=5).data
    owner.webhooks.ack(listener.id, delivery_id=handed.delivery_id, status_code=200)
    [done] = owner.webhooks.deliveries(listener.id).data
    assert done.status == "succeeded"

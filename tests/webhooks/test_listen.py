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
from datetime import datetime, timedelta
from typing import IO

import pytest
from sqlalchemy import select, update

import svc
from reference_server.outbox.delivery import LISTENER_ABANDONED_AFTER, drop_abandoned_listeners
from reference_server.serving import build_server
from reference_server.store import tables as t
from reference_server.timeutil import as_utc
from svc import webhooks

from ..money.helpers import market
from ..support import LiveServer, new_account, until
from .receiver import Receiver


class Cli:
    """``svc listen`` as a subprocess, its stdout read line by line."""

    def __init__(
        self,
        live: LiveServer,
        owner_jwt: str,
        forward_to: str,
        *extra: str,
        poll_wait: float | None = None,
    ) -> None:
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
                *([] if poll_wait is None else ["--poll-wait", str(poll_wait)]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.errors: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        if poll_wait is not None:  # read stderr too (the other tests read it at exit)
            threading.Thread(
                target=self._read, args=(self.proc.stderr, self.errors), daemon=True
            ).start()

    def _read(self, stream: IO[str], into: queue.Queue[str] | None = None) -> None:
        for line in stream:
            (self.lines if into is None else into).put(line.rstrip("\n"))

    def line(self, timeout: float = 30) -> str:
        return self.lines.get(timeout=timeout)

    def error_line(self, timeout: float = 30) -> str:
        """The next stderr line other than the environment's."""
        while True:
            line = self.errors.get(timeout=timeout)
            if not line.startswith("environment: "):
                return line

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


def _listened_at(live: LiveServer, endpoint_id: str) -> datetime | None:
    e = t.webhook_endpoints
    with live.ctx.db.read() as conn:
        value = conn.execute(select(e.c.listened_at).where(e.c.id == endpoint_id)).scalar_one()
    return None if value is None else as_utc(value)


def test_a_listener_nobody_polls_is_swept_by_housekeeping(server: LiveServer) -> None:
    m = market(server)
    owner = svc.Client(base_url=server.url, owner_jwt=m.seller_owner_jwt, environment="test")
    alive = owner.webhooks.listen()
    abandoned = owner.webhooks.listen()
    quiet = owner.webhooks.listen(events=["resource.updated"])  # no delivery ever due
    m.agent.pay(resource_id=m.resource.id)
    until(lambda: owner.webhooks.deliveries(abandoned.id).data)
    now = server.ctx.now()
    assert drop_abandoned_listeners(server.ctx.db, now=now) == 0  # all new
    # Ten minutes on: ``alive``'s CLI polled just now; the others' died long ago.
    later = now + LISTENER_ABANDONED_AFTER + timedelta(minutes=1)
    e = t.webhook_endpoints
    with server.ctx.db.write() as conn:
        conn.execute(update(e).where(e.c.id == alive.id).values(listened_at=later))
    assert drop_abandoned_listeners(server.ctx.db, now=later) == 2
    assert _endpoint_status(server, alive.id) == "enabled"
    assert _endpoint_status(server, abandoned.id) == "deleted"
    assert _endpoint_status(server, quiet.id) == "deleted"  # idle: swept without a delivery
    d = t.webhook_deliveries
    with server.ctx.db.read() as conn:
        statuses = conn.execute(select(d.c.status).where(d.c.endpoint_id == abandoned.id))
        assert set(statuses.scalars()) == {"cancelled"}
        kept = conn.execute(select(d.c.status).where(d.c.endpoint_id == alive.id))
        assert set(kept.scalars()) == {"pending"}


def test_each_poll_marks_the_listener_alive(server: LiveServer) -> None:
    acct = new_account(server.url)
    owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="test")
    listener = owner.webhooks.listen()
    assert _listened_at(server, listener.id) is None
    assert owner.webhooks.poll(listener.id).data == []
    first = _listened_at(server, listener.id)
    assert first is not None
    later = server.ctx.now() + LISTENER_ABANDONED_AFTER + timedelta(minutes=1)
    assert drop_abandoned_listeners(server.ctx.db, now=later - timedelta(minutes=2)) == 0
    assert drop_abandoned_listeners(server.ctx.db, now=later) == 1


def test_listeners_are_left_out_of_the_endpoint_list(server: LiveServer) -> None:
    acct = new_account(server.url)
    owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="test")
    ordinary = owner.webhooks.create("http://localhost:9/hooks")
    listener = owner.webhooks.listen()
    assert [e.id for e in owner.webhooks.list().data] == [ordinary.id]
    # Still its owner's by its id (its deliveries, a test send), no one else's.
    queued = owner.webhooks.test(listener.id)
    assert [d.id for d in owner.webhooks.deliveries(listener.id).data] == [queued.id]
    stranger = svc.Client(
        base_url=server.url, owner_jwt=new_account(server.url).owner_jwt, environment="test"
    )
    with pytest.raises(svc.NotFoundError):
        stranger.webhooks.deliveries(listener.id)
    assert stranger.webhooks.list().data == []


def test_quiet_polls_print_nothing_and_a_lost_service_is_retried_until_back(
    server: LiveServer, receiver: Receiver, clis: list[Cli]
) -> None:
    m = market(server)
    cli = Cli(server, m.seller_owner_jwt, receiver.url, "--environment", "test", poll_wait=0.5)
    clis.append(cli)
    _, endpoint_id = _secret(cli.line())
    # Quiet: the service answers each empty poll at its wait (the heartbeat), the CLI
    # polls again and prints nothing.
    first = until(lambda: _listened_at(server, endpoint_id), "no poll")
    until(lambda: (_listened_at(server, endpoint_id) or first) > first, "no second poll")
    with pytest.raises(queue.Empty):
        cli.line(timeout=1.5)
    # The service goes away: said once on stderr, retried with backoff, not an exit.
    server.stop()
    assert "lost the connection to the service" in cli.error_line()
    assert "still no answer from the service; retrying in 2s" in cli.error_line(timeout=10)
    assert cli.proc.poll() is None
    _restart(server)
    assert cli.error_line(timeout=30) == "reconnected; listening again"
    m.agent.pay(resource_id=m.resource.id)
    assert "payment.succeeded" in cli.line()
    receiver.wait_for(1)
    assert cli.stop() == 0


def test_a_listener_deleted_under_the_cli_ends_it_with_a_clear_error(
    server: LiveServer, clis: list[Cli]
) -> None:
    acct = new_account(server.url)
    cli = Cli(
        server, acct.owner_jwt, "http://localhost:9/hooks", "--environment", "test", poll_wait=0.5
    )
    clis.append(cli)
    _, endpoint_id = _secret(cli.line())
    owner = svc.Client(base_url=server.url, owner_jwt=acct.owner_jwt, environment="test")
    owner.webhooks.delete(endpoint_id)  # as the sweep does for a CLI away too long
    assert cli.proc.wait(timeout=30) == 1
    said = cli.error_line()
    assert f"the listener endpoint {endpoint_id} is gone" in said, said
    assert "run svc listen again" in said


def _restart(live: LiveServer) -> None:
    """The stopped server started again on its address and database (a restart)."""
    port = int(live.url.rsplit(":", 1)[1])
    server = build_server(live.settings, host="127.0.0.1", port=port, log_level="warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started, "the server did not start again")
    live.server, live.thread, live.ctx = server, thread, server.config.app.state.ctx


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

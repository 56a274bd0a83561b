"""The production set-up, run: ``svc-server migrate`` once, two ``svc-server run``
processes and two ``svc-server worker`` processes on one database, rate limits counted in
Redis, and a webhook receiver on loopback.  Concurrent ``/pay``, ``pay-url`` (paying a
hosted gate of this same service), withdrawals and webhooks go through both servers
alternately; afterwards no wallet or seller balance went below zero or paid out more than
it held, every outbox event reached the receiver (at least once, never twice at once), one
credential's rate limit was counted across both servers, ``svc-server ledger audit``
finds the books balanced, and ``GET /metrics`` of either server (the library's multi-process
mode) counts what all four processes did.

It runs on the suite's database: PostgreSQL (the production set-up) on CI's PostgreSQL leg,
one SQLite file shared by the four processes on the other.  Redis is required: at
``SVC_TEST_REDIS_URL``, else at its default address ``redis://127.0.0.1:6379``; the test
skips only when no Redis answers there.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from collections.abc import Awaitable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

import svc
from reference_server.store import Database
from reference_server.store import tables as t

from ..sandbox.helpers import assert_chain_sound
from ..support import TEST_REDIS_URL, free_port, new_account, redis_answers, until
from .deployment import (
    KEYS,
    Receiver,
    enable_payouts,
    ledger_audit,
    migrate,
    running,
    start_receiver,
    start_server,
    start_worker,
)

REDIS_URL = TEST_REDIS_URL

pytestmark = pytest.mark.skipif(
    not redis_answers(),
    reason=f"the multi-process test shares rate limits in Redis: none answers at {REDIS_URL} "
    "(start redis-server, or set SVC_TEST_REDIS_URL)",
)

#: Per credential per minute, shared through Redis.  Every credential of the traffic
#: stays well under it; one credential used only to be limited goes over it.
LIMIT = 200
OVER = 20
WALLETS, PAYS_PER_WALLET, WALLET_FUNDS = 4, 15, "10.00"  # 10 of 15 at 1.00 can be paid
AGENTS, PAY_URLS_PER_AGENT = 2, 6  # 4 of 6 at 0.25 from 1.00
WITHDRAWALS = 16  # of 1.00 each, from a balance of 9.90: 9 can be made
#: Requests in flight at once over both servers: enough to race every balance, and within
#: what four processes may hold of PostgreSQL's default 100 connections (each process's
#: pool grows with its concurrent requests; deploy.md, "Connections to PostgreSQL").
IN_FLIGHT = 16
METRICS_TOKEN = "scrape-" + uuid.uuid4().hex


def D(text: str) -> Decimal:
    return Decimal(text)


def owner_client(url: str, owner_jwt: str) -> svc.Client:
    return svc.Client(base_url=url, owner_jwt=owner_jwt, environment="test", max_retries=0)


def test_two_servers_and_two_workers_on_one_database(database_url: str, tmp_path: Path) -> None:
    migrate(database_url)
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    receiver = start_receiver(fail_every=5)
    a_port, b_port = free_port(), free_port()
    common = {
        "SVC_DATABASE_URL": database_url,
        **KEYS,
        "SVC_AUTO_MIGRATE": "false",  # migrated once, above
        "SVC_RATE_LIMIT_STORAGE": REDIS_URL,
        "SVC_RATE_LIMIT": f"{LIMIT}/minute",
        "SVC_SIGNUP_RATE_LIMIT": "100000/second",
        "SVC_METRICS_TOKEN": METRICS_TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    api = {
        **common,
        "SVC_WORKER_ENABLED": "false",  # delivery is the workers' job
        # One deployment: gates are published under one address (here server A's).
        "SVC_PUBLIC_URL": f"http://127.0.0.1:{a_port}",
    }
    delivery = {
        **common,
        "SVC_WORKER_POLL_SECONDS": "0.05",
        "SVC_WEBHOOK_RETRY_SCHEDULE": "0.2,0.5,1,2,4",
        "SVC_WEBHOOK_RETRY_JITTER": "0",
        "SVC_WORKER_LEASE_SECONDS": "30",
        "SVC_SANDBOX_PAYOUT_SECONDS": "0.2",
        "SVC_DATABASE_POOL_SIZE": "4",  # as docs/deploy.md advises for workers
    }
    a = start_server(api, tmp_path / "a.log", a_port)
    b = start_server(api, tmp_path / "b.log", b_port)
    w1 = start_worker(delivery, tmp_path / "w1.log")
    w2 = start_worker(delivery, tmp_path / "w2.log")
    db = Database(database_url)
    try:
        with running(a, b, w1, w2):
            _exercise([a.url, b.url], db, receiver)
        for proc in (a, b):  # uvicorn finished what it was doing, then re-raised SIGTERM
            assert proc.popen.returncode in (0, -signal.SIGTERM), proc.output()
            assert "Application shutdown complete" in proc.output()
        for proc in (w1, w2):
            assert proc.popen.returncode == 0, proc.output()
        ledger_audit(database_url)
        assert_chain_sound(db)
    finally:
        db.engine.dispose()
        receiver.stop()


def _exercise(urls: list[str], db: Database, receiver: Receiver) -> None:
    setup = _set_up(urls, receiver)
    outcome = asyncio.run(_traffic(urls, setup))

    # /pay: each wallet paid exactly what it held, no more.
    for counts in outcome["pay"]:
        assert counts == Counter({"paid": 10, "insufficient_funds": 5}), counts
    for key in setup["wallet_keys"]:
        with svc.Client(base_url=urls[1], wallet_key=key, max_retries=0) as agent:
            assert agent.spend.balance().balance == D("0.00")
    with svc.Client(base_url=urls[0], seller_key=setup["market_seller"], max_retries=0) as s:
        assert s.sellers.balance().balance == WALLETS * 10 * D("0.99")

    # pay-url: each agent paid the gate with what it held, no more.
    for paid in outcome["pay_url"]:
        assert paid["paid"] == 4, paid
        assert set(paid) <= {"paid", "insufficient_funds"}, paid
    for key in setup["agent_keys"]:
        with svc.Client(base_url=urls[0], wallet_key=key, max_retries=0) as agent:
            assert agent.spend.balance().balance == D("0.00")
    with svc.Client(base_url=urls[1], seller_key=setup["gate_seller"], max_retries=0) as s:
        assert s.sellers.balance().balance == AGENTS * 4 * D("0.2475")

    # Withdrawals: never more than the balance; every one made is paid by a worker.
    assert outcome["withdraw"] == Counter({"created": 9, "insufficient_funds": 7})
    until(lambda: _withdrawals_left(db) == 0, "withdrawals still moving", seconds=90)
    w = t.withdrawals
    with db.read() as conn:
        statuses = Counter(conn.execute(select(w.c.status)).scalars())
        paid_out = conn.execute(select(func.sum(w.c.amount_micros))).scalar_one()
    assert statuses == Counter({"paid": 9}) and paid_out == 9_000_000
    with svc.Client(base_url=urls[0], seller_key=setup["payout_seller"], max_retries=0) as s:
        assert s.sellers.balance().balance == D("0.90")

    # No account that must stay at or above zero went below it, reservations included.
    a = t.ledger_accounts
    with db.read() as conn:
        negative = conn.execute(
            select(a.c.kind, a.c.ref_id).where(
                a.c.allow_negative.is_(False),
                (a.c.balance_micros < 0) | (a.c.balance_micros - a.c.pending_debit_micros < 0),
            )
        ).all()
    assert negative == []

    # Rate limits: one credential's requests through both servers counted together.
    limited = outcome["rate_limit"]
    assert limited == Counter({200: LIMIT, 429: OVER}), limited

    # Webhooks: every delivery in the outbox reached the receiver, none twice at once.
    until(lambda: _deliveries_pending(db) == 0, "deliveries still pending", seconds=90)
    with db.read() as conn:
        rows = conn.execute(
            select(t.webhook_deliveries.c.event_id, t.webhook_deliveries.c.status)
        ).all()
    assert rows and {row.status for row in rows} == {"succeeded"}
    outbox = {row.event_id for row in rows}
    assert outbox <= set(receiver.received), len(outbox - set(receiver.received))
    assert receiver.overlapping == []
    retried = [event for event, n in receiver.received.items() if n > 1]
    assert retried, "the receiver's refusals should have caused retries"
    _check_metrics(urls, outbox=len(rows), wallets=len(setup["wallet_keys"]))


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``GET /metrics`` read into {(sample name, labels): value}."""
    r = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(r.text)
        for sample in family.samples
    }


def _total(
    scraped: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    want = set(labels.items())
    return sum(v for (n, got), v in scraped.items() if n == name and want <= got)


def _check_metrics(urls: list[str], *, outbox: int, wallets: int) -> None:
    """Either server's scrape counts the requests both served and the deliveries both
    workers made, and reads the books as they are."""
    a, b = (_scrape(url) for url in urls)
    for scraped in (a, b):
        requests = "svc_http_requests_total"
        # The market's sales, and the payout seller's two made while setting up.
        assert _total(scraped, requests, route="/pay", status="200") == wallets * 10 + 2
        assert _total(scraped, requests, route="/pay", status="402") == wallets * 5
        assert _total(scraped, requests, route="/sellers/me/withdraw", status="201") == 9
        assert _total(scraped, requests, route="/sellers", method="GET", status="429") == OVER
        assert _total(scraped, "svc_rate_limited_total", limit="rate_limit") == OVER
        assert _total(scraped, "svc_http_request_duration_seconds_count", route="/pay") == (
            wallets * PAYS_PER_WALLET + 2
        )
        assert _total(scraped, "svc_webhook_deliveries_total", outcome="succeeded") >= outbox
        assert _total(scraped, "svc_webhook_deliveries_total", outcome="retrying") >= 1
        # pay-url: a probe and a paid request for each payment, a probe for each refusal.
        assert _total(scraped, "svc_pay_url_upstream_seconds_count", outcome="2xx") == AGENTS * 4
        assert _total(scraped, "svc_pay_url_attempts_total", status="succeeded") == AGENTS * 4
        # The books: the market's 40 sales, the gate's 8 (both sides) and the payout sales.
        paid = _total(scraped, "svc_payments_total", rail="rill", status="settled")
        assert paid >= wallets * 10 + 2
        assert _total(scraped, "svc_withdrawals", status="paid") == 9
        assert _total(scraped, "svc_webhook_outbox_backlog") == 0


def _set_up(urls: list[str], receiver: Receiver) -> dict[str, Any]:
    """Sellers, wallets and webhook endpoints, made through both servers alternately."""
    a, b = urls
    market = new_account(a)
    buyers = new_account(b)
    gate = new_account(a)
    agents = new_account(b)
    payout = new_account(a)
    for i, acct in enumerate((market, buyers, gate, agents, payout)):
        with owner_client(urls[i % 2], acct.owner_jwt) as owner:
            owner.webhooks.create(receiver.url)  # every event type

    with svc.Client(base_url=a, seller_key=market.seller_key, max_retries=0) as s:
        resource = s.resources.create(kind="http", path="/v1/report", amount="1.00")
    wallet_keys = []
    with owner_client(b, buyers.owner_jwt) as owner:
        for i in range(WALLETS):
            key = owner.wallet_keys.create(name=f"w{i}")
            owner.wallet_keys.fund(key.id, WALLET_FUNDS)
            wallet_keys.append(key.key)

    with svc.Client(base_url=a, seller_key=gate.seller_key, max_retries=0) as s:
        gated = s.resources.create(kind="http", path="/v1/report", amount="0.25")
        s.sellers.enable_payments()
    agent_keys = []
    with owner_client(b, agents.owner_jwt) as owner:
        for i in range(AGENTS):
            key = owner.wallet_keys.create(name=f"agent{i}")
            owner.wallet_keys.fund(key.id, "1.00")
            agent_keys.append(key.key)

    # The payout seller: 9.90 from two sales at 5.00, then onboarded for payouts.
    with svc.Client(base_url=b, seller_key=payout.seller_key, max_retries=0) as s:
        sold = s.resources.create(kind="http", path="/v1/report", amount="5.00")
    with owner_client(a, payout.owner_jwt) as owner:
        key = owner.wallet_keys.create(name="buyer")
        owner.wallet_keys.fund(key.id, "10.00")
    with svc.Client(base_url=a, wallet_key=key.key, max_retries=0) as buyer:
        for _ in range(2):
            buyer.pay(resource_id=sold.id)
    enable_payouts(b, a, payout.seller_key)

    # The credential only the rate-limit check uses.
    limited = httpx.post(a + "/owners", json={"email": f"rl{uuid.uuid4().hex[:8]}@example.com"})
    assert limited.status_code == 201, limited.text
    return {
        "resource_id": resource.id,
        "market_seller": market.seller_key,
        "wallet_keys": wallet_keys,
        "gate_url": gated.gate_url,
        "gate_seller": gate.seller_key,
        "agent_keys": agent_keys,
        "payout_seller": payout.seller_key,
        "limited_jwt": limited.json()["owner_jwt"],
    }


async def _traffic(urls: list[str], setup: dict[str, Any]) -> dict[str, Any]:
    """Everything at once, each kind of request alternating between the two servers."""
    in_flight = asyncio.Semaphore(IN_FLIGHT)
    async with httpx.AsyncClient(timeout=120) as http:

        async def post(i: int, path: str, key: str, body: dict[str, Any]) -> httpx.Response:
            async with in_flight:
                return await http.post(
                    urls[i % 2] + path,
                    json=body,
                    headers={
                        "Authorization": f"Bearer {key}",
                        "Idempotency-Key": str(uuid.uuid4()),
                    },
                )

        def code(r: httpx.Response, ok: int, name: str) -> str:
            if r.status_code == ok:
                return name
            assert r.status_code in (402, 409), r.text  # refused for the money, nothing else
            return str(r.json()["error"]["code"])

        async def burst(path: str, key: str, body: Any, times: int, ok: int) -> Counter[str]:
            """``times`` posts at once, counted by outcome (``paid``/``created`` for ``ok``)."""
            answers = await asyncio.gather(*(post(i, path, key, body) for i in range(times)))
            return Counter(code(r, ok, "paid" if ok == 200 else "created") for r in answers)

        async def rate_limited() -> Counter[int]:
            headers = {
                "Authorization": f"Bearer {setup['limited_jwt']}",
                "X-Svc-Environment": "test",
            }

            async def one(i: int) -> int:
                async with in_flight:
                    r = await http.get(urls[i % 2] + "/sellers", headers=headers)
                assert r.status_code in (200, 429), r.text
                return r.status_code

            return Counter(await asyncio.gather(*(one(i) for i in range(LIMIT + OVER))))

        to_pay, to_fetch = {"resource_id": setup["resource_id"]}, {"url": setup["gate_url"]}
        jobs: list[Awaitable[Any]] = [
            asyncio.gather(
                *(burst("/pay", k, to_pay, PAYS_PER_WALLET, 200) for k in setup["wallet_keys"])
            ),
            asyncio.gather(
                *(
                    burst("/spend/pay-url", k, to_fetch, PAY_URLS_PER_AGENT, 200)
                    for k in setup["agent_keys"]
                )
            ),
            burst(
                "/sellers/me/withdraw", setup["payout_seller"], {"amount": "1.00"}, WITHDRAWALS, 201
            ),
            rate_limited(),
        ]
        pay, pay_url, withdraw, limited = await asyncio.gather(*jobs)
    return {"pay": pay, "pay_url": pay_url, "withdraw": withdraw, "rate_limit": limited}


def _withdrawals_left(db: Database) -> int:
    w = t.withdrawals
    with db.read() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(w).where(w.c.status.not_in(["paid", "failed"]))
            ).scalar_one()
        )


def _deliveries_pending(db: Database) -> int:
    d = t.webhook_deliveries
    with db.read() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(d).where(d.c.status == "pending")
            ).scalar_one()
        )

"""A bounded soak: about a minute of mixed traffic (``/pay``, reads, ``pay-url`` through a
hosted gate of this service, withdrawals, and the webhooks they cause) against one
``svc-server run`` process and one ``svc-server worker`` on the suite's database.  Taken
after a warm-up and again after the traffic stops and settles, each process's memory
(RSS), database connections and HTTP connections are back near where they started: a
leak of any of them, slow as it may be, grows with every request and shows here.

It asserts resources, never speed: how much traffic fits in the minute does not matter.
``SVC_SOAK_SECONDS`` sets the length (default 60; CI runs the default).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
from sqlalchemy.engine import make_url

import svc
from reference_server.store import Database

from ..support import free_port, new_account
from .deployment import (
    KEYS,
    Proc,
    Receiver,
    enable_payouts,
    ledger_audit,
    migrate,
    open_files,
    rss_bytes,
    running,
    start_receiver,
    start_server,
    start_worker,
    tcp_sockets,
)

SOAK_SECONDS = float(os.environ.get("SVC_SOAK_SECONDS", "60"))
WARM_UP_SECONDS = min(10.0, SOAK_SECONDS / 4)
CLIENTS = 4
#: Memory a process may keep beyond its warmed-up size: a fifth of it, or 32 MiB, whichever
#: is more (allocators keep freed memory for reuse; a leak grows without bound).
RSS_SLACK = 0.2
RSS_SLACK_BYTES = 32 * 1024 * 1024
#: Outbound connections a process may keep open and idle for reuse (webhook receivers,
#: gates): a small pool per address, far fewer than the requests it made.
OUTBOUND_SLACK = 10
SETTLE_SECONDS = 30


@attrs.frozen
class Snapshot:
    rss: int
    database: int
    inbound: int
    outbound: int


def test_memory_and_connections_come_back_after_a_minute_of_mixed_traffic(
    database_url: str, tmp_path: Path
) -> None:
    migrate(database_url)
    receiver = start_receiver()
    port = free_port()
    common = {
        "SVC_DATABASE_URL": database_url,
        **KEYS,
        "SVC_AUTO_MIGRATE": "false",
        "SVC_RATE_LIMIT": "100000/second",
        "SVC_SIGNUP_RATE_LIMIT": "100000/second",
        "SVC_SANDBOX_PAYOUT_SECONDS": "0.2",
    }
    server = start_server(
        {**common, "SVC_WORKER_ENABLED": "false", "SVC_PUBLIC_URL": f"http://127.0.0.1:{port}"},
        tmp_path / "server.log",
        port,
    )
    worker = start_worker({**common, "SVC_WORKER_POLL_SECONDS": "0.05"}, tmp_path / "worker.log")
    pool_size = _pool_size(database_url)
    measure = _measurer(database_url)
    try:
        with running(server, worker):
            setup = _set_up(server.url, receiver)
            asyncio.run(_traffic(server.url, setup, WARM_UP_SECONDS))
            start = _settled(server, worker, measure, lambda s, w: True)
            done = asyncio.run(_traffic(server.url, setup, SOAK_SECONDS))

            def back(s: Snapshot, w: Snapshot) -> bool:
                return not _excess(start, (s, w), pool_size)

            end = _settled(server, worker, measure, back)
        report = f"after warm-up {start}, at the end {end}, requests {dict(done)}"
        print("\nsoak:", report)
        assert set(done) <= {"ok"}, report
        assert done["ok"] > 0, report
        assert _excess(start, end, pool_size) == [], report
        ledger_audit(database_url)
    finally:
        receiver.stop()


def _excess(
    start: tuple[Snapshot, Snapshot], end: tuple[Snapshot, Snapshot], pool_size: int
) -> list[str]:
    """What has not come back near its start, per process."""
    found = []
    for name, before, after in zip(("server", "worker"), start, end, strict=True):
        rss_bound = before.rss + max(RSS_SLACK * before.rss, RSS_SLACK_BYTES)
        if after.rss > rss_bound:
            found.append(f"{name} RSS {after.rss} > {int(rss_bound)}")
        if after.database > before.database + pool_size:
            found.append(f"{name} database connections {after.database} > {before.database}")
        if after.inbound > before.inbound:
            found.append(f"{name} inbound HTTP connections {after.inbound} > {before.inbound}")
        if after.outbound > before.outbound + OUTBOUND_SLACK:
            found.append(f"{name} outbound connections {after.outbound} > {before.outbound}")
    return found


def _pool_size(database_url: str) -> int:
    """The connections a process keeps in its pool once the overflow has closed."""
    db = Database(database_url)
    try:
        return int(db.engine.pool.size())  # type: ignore[attr-defined]
    finally:
        db.engine.dispose()


def _measurer(database_url: str) -> Callable[[Proc], Snapshot]:
    url = make_url(database_url)
    sqlite_file = Path(url.database or "") if url.get_backend_name() == "sqlite" else None
    database_port = url.port or 5432

    def measure(proc: Proc) -> Snapshot:
        sockets = tcp_sockets(proc.pid, listen_port=proc.port, database_port=database_port)
        database = (
            open_files(proc.pid, sqlite_file) if sqlite_file is not None else sockets.database
        )
        return Snapshot(
            rss=rss_bytes(proc.pid),
            database=database,
            inbound=sockets.inbound,
            outbound=sockets.outbound,
        )

    return measure


def _settled(
    server: Proc,
    worker: Proc,
    measure: Callable[[Proc], Snapshot],
    done: Callable[[Snapshot, Snapshot], bool],
) -> tuple[Snapshot, Snapshot]:
    """Once the traffic has stopped: wait for idle keep-alive connections to close (the
    server closes them after its keep-alive timeout) and the worker to finish what it
    claimed, then measure; or, past ``SETTLE_SECONDS``, the last measure."""
    time.sleep(1)
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        s, w = measure(server), measure(worker)
        if (s.inbound == 0 and done(s, w)) or time.monotonic() > deadline:
            return s, w
        time.sleep(0.5)


def _set_up(url: str, receiver: Receiver) -> dict[str, Any]:
    market, buyer, gate, agent = (new_account(url) for _ in range(4))
    for acct in (market, buyer, gate, agent):
        with svc.Client(base_url=url, owner_jwt=acct.owner_jwt, environment="test") as owner:
            owner.webhooks.create(receiver.url)
    with svc.Client(base_url=url, seller_key=market.seller_key) as s:
        resource = s.resources.create(kind="http", path="/v1/report", amount="0.01")
    with svc.Client(base_url=url, seller_key=gate.seller_key) as s:
        gated = s.resources.create(kind="http", path="/v1/report", amount="0.01")
        s.sellers.enable_payments()
    keys = {}
    for name, acct in (("buyer", buyer), ("agent", agent)):
        with svc.Client(base_url=url, owner_jwt=acct.owner_jwt, environment="test") as owner:
            owner.wallet_keys.fund(acct.wallet_key_id, "100000.00")
        keys[name] = acct.wallet_key
    with svc.Client(base_url=url, wallet_key=keys["buyer"]) as paying:
        for _ in range(20):  # a balance for the first withdrawals
            paying.pay(resource_id=resource.id)
    enable_payouts(url, url, market.seller_key)
    return {
        "resource_id": resource.id,
        "gate_url": gated.gate_url,
        "buyer": keys["buyer"],
        "agent": keys["agent"],
        "seller": market.seller_key,
    }


async def _traffic(url: str, setup: dict[str, Any], seconds: float) -> Counter[str]:
    """``CLIENTS`` clients, each in a loop until ``seconds`` have passed: mostly payments
    and reads, with a ``pay-url`` and a small withdrawal now and then."""
    deadline = time.monotonic() + seconds
    outcomes: Counter[str] = Counter()

    def auth(key: str, idempotent: bool = False) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {key}"}
        if idempotent:
            headers["Idempotency-Key"] = str(uuid.uuid4())
        return headers

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            i = n
            while time.monotonic() < deadline:
                i += 1
                if i % 20 == 0:
                    r = await http.post(
                        "/spend/pay-url",
                        json={"url": setup["gate_url"]},
                        headers=auth(setup["agent"], True),
                    )
                elif i % 25 == 1:
                    r = await http.post(
                        "/sellers/me/withdraw",
                        json={"amount": "0.01"},
                        headers=auth(setup["seller"], True),
                    )
                elif i % 3 == 0:
                    r = await http.get("/spend/balance", headers=auth(setup["buyer"]))
                elif i % 3 == 1:
                    r = await http.get("/sellers/me/balance", headers=auth(setup["seller"]))
                else:
                    r = await http.post(
                        "/pay",
                        json={"resource_id": setup["resource_id"]},
                        headers=auth(setup["buyer"], True),
                    )
                outcomes["ok" if r.status_code in (200, 201) else f"{r.status_code}"] += 1

    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    return outcomes

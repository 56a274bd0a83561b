"""``POST /pay`` throughput and latency, as a ratio to a one-row commit in the same server.

Run: ``python bench/pay_throughput.py`` (about a minute with the defaults; needs the
``[server]`` extras and, for PostgreSQL, a server at ``--postgres-url``); ``--quick`` for a
short run, ``--json PATH`` to write the figures as rows of the bench JSON protocol
(``bench/README.md``): per database and concurrency the throughput ratio (target >= 0.6),
and the p99 at 32 clients on PostgreSQL (target < 100 ms).

For each database the bench starts ``bench/_baseline_server.py`` (the reference server
plus the baseline route) in a subprocess (a fresh SQLite file in a temporary directory, or
a fresh PostgreSQL schema that it creates and drops), with a rate limit too high to
matter.  Over
plain HTTP it sets up a seller selling one resource at 0.01 and a funded wallet key
(test environment).  Then, for 1, 8 and 32 concurrent clients, closed loops of async
httpx clients (one connection each, a fresh Idempotency-Key per request) hammer for
``--seconds`` each:

- ``POST /pay`` with the resource: wallet-key policy check, three ledger accounts locked,
  two transfers, a receipt, an outbox event;
- ``POST /_bench/commit``, the baseline: the same ``Endpoint`` pipeline (rate limit,
  wallet-key auth, idempotency record, one write transaction) inserting one row.

The ratio pay/baseline isolates what the payment logic costs on top of the pipeline.  Each
route's time is split in two halves run in A B B A order (the first route alternating from
one concurrency level to the next), so slow drift in the machine hits both alike.  Client
and server share the machine: on a small one the client's CPU is part of the picture.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import os
import platform
import secrets
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    DEFAULT_POSTGRES,
    fresh_database,
    post_json,
    postgres_version,
    process_cpu_seconds,
    reference_server,
    report_failures,
)

CONCURRENCY = (1, 8, 32)
#: The issue's targets: throughput >= 0.6 x the baseline's at every concurrency, and the
#: p99 at the highest concurrency on PostgreSQL under 100 ms.
RATIO_TARGET = 0.6
P99_TARGET_MS = 100.0
QUICK_SECONDS = 1.0
PRICE = "0.01"
FUNDING = "100000.00"  # ten million pays at PRICE
ROUTES = ("pay", "commit")
MAX_ERRORS_SHOWN = 5


@attrs.define
class Sample:
    """What one route did in one cell: latencies, wall time, errors, server CPU."""

    latencies: list[float] = attrs.Factory(list)
    seconds: float = 0.0
    errors: int = 0
    error_examples: list[str] = attrs.Factory(list)
    server_cpu: float | None = 0.0
    client_cpu: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile, in seconds."""
        ordered = sorted(self.latencies)
        if not ordered:
            return math.nan
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    @property
    def cpu_ms_per_request(self) -> float | None:
        if self.server_cpu is None or not self.latencies:
            return None
        return self.server_cpu / len(self.latencies) * 1e3

    @property
    def client_cpu_ms_per_request(self) -> float:
        return self.client_cpu / len(self.latencies) * 1e3 if self.latencies else math.nan


@attrs.frozen
class Setup:
    wallet_key: str
    resource_id: str


# --- the server under test ---------------------------------------------------------


@contextmanager
def running_server(database_url: str, log_path: Path) -> Iterator[tuple[str, int]]:
    """The server under test, with the baseline route; yields (base URL, pid)."""
    script = Path(__file__).with_name("_baseline_server.py")
    with reference_server(database_url, log_path, script=script) as (url, process):
        yield url, process.pid


# --- set-up over plain HTTP ---------------------------------------------------------


def set_up(url: str) -> Setup:
    """A seller selling one resource at PRICE, and a wallet key funded with FUNDING."""
    test = {"X-Svc-Environment": "test"}
    with httpx.Client(base_url=url, timeout=30) as http:
        post = functools.partial(post_json, http)

        seller_owner = post("/owners", {"email": f"s{secrets.token_hex(6)}@example.com"})
        seller = post(
            "/sellers",
            {"name": "bench shop"},
            Authorization=f"Bearer {seller_owner['owner_jwt']}",
            **test,
        )
        resource = post(
            "/resources",
            {"kind": "http", "path": "/v1/report", "amount": PRICE},
            Authorization=f"Bearer {seller['seller_key']}",
        )
        agent_owner = post("/owners", {"email": f"a{secrets.token_hex(6)}@example.com"})
        owner_auth = f"Bearer {agent_owner['owner_jwt']}"
        key = post("/wallet-keys", {"name": "bench agent"}, Authorization=owner_auth, **test)
        post(
            f"/wallet-keys/{key['id']}/fund",
            {"amount": FUNDING},
            Authorization=owner_auth,
            **test,
        )
    return Setup(wallet_key=key["key"], resource_id=resource["id"])


# --- the load ---------------------------------------------------------------------


def request_for(route: str, setup: Setup) -> tuple[str, dict[str, Any]]:
    if route == "pay":
        return "/pay", {"resource_id": setup.resource_id}
    return "/_bench/commit", {}


async def closed_loop(
    clients: list[httpx.AsyncClient],
    path: str,
    body: dict[str, Any],
    seconds: float,
    sample: Sample,
) -> None:
    """Every client sends its next request as soon as the last one is answered, until
    ``seconds`` have passed; ``sample`` collects what happened."""
    start = time.perf_counter()
    deadline = start + seconds

    async def client_loop(http: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            headers = {"Idempotency-Key": uuid.uuid4().hex}
            began = time.perf_counter()
            try:
                r = await http.post(path, json=body, headers=headers)
                failure = None if r.status_code == 200 else f"{r.status_code} {r.text[:300]}"
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            took = time.perf_counter() - began
            if failure is None:
                sample.latencies.append(took)
            else:
                sample.errors += 1
                if len(sample.error_examples) < MAX_ERRORS_SHOWN:
                    sample.error_examples.append(f"POST {path}: {failure}")

    await asyncio.gather(*(client_loop(http) for http in clients))
    sample.seconds += time.perf_counter() - start


async def measure_cell(
    url: str, pid: int, setup: Setup, concurrency: int, seconds: float, first: str
) -> dict[str, Sample]:
    """Both routes at one concurrency: a short warm-up each, then halves in A B B A order."""
    second = ROUTES[1] if first == ROUTES[0] else ROUTES[0]
    samples = {route: Sample() for route in ROUTES}
    clients = [
        httpx.AsyncClient(
            base_url=url,
            timeout=60,
            headers={"Authorization": f"Bearer {setup.wallet_key}"},
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        for _ in range(concurrency)
    ]
    try:
        warm_up = min(0.5, seconds / 4)
        for route in (first, second):
            discarded = Sample()  # only its failures count
            await closed_loop(clients, *request_for(route, setup), warm_up, discarded)
            samples[route].errors += discarded.errors
            samples[route].error_examples += discarded.error_examples
        for route in (first, second, second, first):
            sample = samples[route]
            cpu_before, client_before = process_cpu_seconds(pid), time.process_time()
            await closed_loop(clients, *request_for(route, setup), seconds / 2, sample)
            cpu_after = process_cpu_seconds(pid)
            sample.client_cpu += time.process_time() - client_before
            if cpu_before is None or cpu_after is None or sample.server_cpu is None:
                sample.server_cpu = None
            else:
                sample.server_cpu += cpu_after - cpu_before
    finally:
        for http in clients:
            await http.aclose()
    return samples


def run_database(name: str, database_url: str, seconds: float) -> list[dict[str, Sample]]:
    with tempfile.TemporaryDirectory(prefix="svc-bench-log-") as logs:
        log_path = Path(logs) / "server.log"
        with running_server(database_url, log_path) as (url, pid):
            setup = set_up(url)
            cells = []
            for i, concurrency in enumerate(CONCURRENCY):
                first = ROUTES[i % 2]
                print(f"  {name}: {concurrency} client(s)...", file=sys.stderr, flush=True)
                cells.append(
                    asyncio.run(measure_cell(url, pid, setup, concurrency, seconds, first))
                )
        return cells


# --- report ---------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def cpu(sample: Sample) -> str:
    value = sample.cpu_ms_per_request
    return "-" if value is None else f"{value:.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def print_table(results: dict[str, list[dict[str, Sample]]], header: list[str]) -> None:
    for line in header:
        print(line)
    columns = (
        f"{'database':<10} {'clients':>7} | {'pay/s':>7} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'cpu ms':>6} | {'base/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms':>6}"
        f" | {'thr':>5} {'p50':>5} {'p99':>5} | {'errors':>6}"
    )
    above = (
        f"{'':<10} {'':>7} | {'POST /pay':<30} | {'POST /_bench/commit (baseline)':<30}"
        f" | {'pay / baseline':<17} |"
    )
    print()
    print(above)
    print(columns)
    print("-" * len(columns))
    for name, cells in results.items():
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True):
            pay, base = cell["pay"], cell["commit"]
            print(
                f"{name:<10} {concurrency:>7} | {pay.throughput:>7.0f} {ms(pay.percentile(0.5)):>7}"
                f" {ms(pay.percentile(0.99)):>7} {cpu(pay):>6} | {base.throughput:>7.0f}"
                f" {ms(base.percentile(0.5)):>7} {ms(base.percentile(0.99)):>7}"
                f" {cpu(base):>6} | {ratio(pay.throughput, base.throughput):>5}"
                f" {ratio(pay.percentile(0.5), base.percentile(0.5)):>5}"
                f" {ratio(pay.percentile(0.99), base.percentile(0.99)):>5}"
                f" | {pay.errors + base.errors:>6}"
            )
    print()
    print("thr = pay/s / base/s (below 1: /pay is slower); p50, p99 = pay latency / baseline")
    print("latency (above 1: /pay is slower).  cpu ms = the server process's CPU per request")
    print("(the database's own processes not counted).  The client's CPU per request, pay /")
    print("baseline, at " + " / ".join(map(str, CONCURRENCY)) + " clients (it takes cores too):")
    for name, cells in results.items():
        shares = ", ".join(
            f"{cell['pay'].client_cpu_ms_per_request:.1f} / "
            f"{cell['commit'].client_cpu_ms_per_request:.1f}"
            for cell in cells
        )
        print(f"  {name}: {shares} ms")


def json_rows(results: dict[str, list[dict[str, Sample]]]) -> list[dict[str, Any]]:
    """The figures of the issue's table, one row each (the bench JSON protocol)."""
    rows: list[dict[str, Any]] = []
    for name, cells in results.items():
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True):
            pay, base = cell["pay"], cell["commit"]
            value = round(pay.throughput, 1)
            ratio = pay.throughput / base.throughput if base.throughput else None
            rows.append(
                {
                    "measure": "POST /pay throughput",
                    "database": name,
                    "setting": f"{concurrency} client{'s' if concurrency > 1 else ''}",
                    "value": value,
                    "unit": "req/s",
                    "baseline_name": "one-row commit, same pipeline",
                    "baseline": round(base.throughput, 1),
                    "ratio": None if ratio is None else round(ratio, 3),
                    "target": f">= {RATIO_TARGET}",
                    "met": ratio is not None and ratio >= RATIO_TARGET,
                }
            )
        if name == "postgresql":
            p99 = cells[-1]["pay"].percentile(0.99) * 1e3
            rows.append(
                {
                    "measure": "POST /pay p99",
                    "database": name,
                    "setting": f"{CONCURRENCY[-1]} clients",
                    "value": round(p99, 1),
                    "unit": "ms",
                    "baseline_name": None,
                    "baseline": None,
                    "ratio": None,
                    "target": f"< {P99_TARGET_MS:g} ms",
                    "met": p99 < P99_TARGET_MS,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per route and cell")
    parser.add_argument(
        "--quick", action="store_true", help=f"a short run ({QUICK_SECONDS:g} s per route and cell)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON rows")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    args = parser.parse_args()
    if args.quick:
        args.seconds = QUICK_SECONDS
    databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    unknown = set(databases) - {"sqlite", "postgresql"}
    if unknown or not databases:
        parser.error(f"--databases takes sqlite and/or postgresql, not {sorted(unknown)}")

    versions = {"sqlite": f"SQLite {sqlite3.sqlite_version}"}
    if "postgresql" in databases:
        versions["postgresql"] = postgres_version(args.postgres_url)
    cores = os.cpu_count() or 0
    header = [
        "POST /pay vs POST /_bench/commit (one row committed through the same pipeline)",
        f"Python {platform.python_version()}, "
        + ", ".join(versions[d] for d in databases)
        + f"; closed loop at {' / '.join(map(str, CONCURRENCY))} clients,",
        f"{args.seconds:g} s per route and cell (two halves, A B B A), a fresh "
        "Idempotency-Key per request,",
        f"one wallet key, a resource priced {PRICE}.",
        f"Client, server (one uvicorn process) and database share this machine's {cores} cores:",
        "they compete for CPU, so read the ratios; the absolute numbers are not capacity.",
    ]

    results: dict[str, list[dict[str, Sample]]] = {}
    for name in databases:
        with fresh_database(name, args.postgres_url) as database_url:
            results[name] = run_database(name, database_url, args.seconds)

    print_table(results, header)
    if args.json:
        Path(args.json).write_text(json.dumps(json_rows(results), indent=2) + "\n")
    failures = [
        example
        for cells in results.values()
        for cell in cells
        for sample in cell.values()
        for example in sample.error_examples
    ]
    total = sum(s.errors for cells in results.values() for c in cells for s in c.values())
    report_failures(failures, total, MAX_ERRORS_SHOWN)


if __name__ == "__main__":
    main()

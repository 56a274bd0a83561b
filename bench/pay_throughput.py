"""``POST /pay`` throughput and latency, as a ratio to a one-row commit in the same server.

Run: ``python bench/pay_throughput.py`` (about 1.5 minutes with the defaults; needs the
``[server]`` extras, ``wrk`` (``apt-get install wrk``) and, for PostgreSQL, a server at
``--postgres-url``); ``--quick`` for a short run, ``--json PATH`` to write the figures as
rows of the bench JSON protocol (``bench/README.md``): per database and concurrency the
throughput ratio (target >= 0.6), and the p99 at 32 clients on PostgreSQL (target < 100 ms).

For each database the bench starts ``bench/_baseline_server.py`` (the reference server
plus the baseline route) in a subprocess (a fresh SQLite file in a temporary directory, or
a fresh PostgreSQL schema that it creates and drops), with a rate limit too high to
matter.  Over plain HTTP it sets up a seller selling one resource at 0.01 and a funded
wallet key (test environment).  Then, for 1, 8 and 32 concurrent clients, ``wrk`` (a C
load generator) holds that many keep-alive connections in a closed loop, each sending its
next request when the last is answered, a fresh Idempotency-Key on every request (a Lua
script, written to a temporary file, builds them and counts the answers that are not 200):

- ``POST /pay`` with the resource: wallet-key policy check, three ledger accounts locked,
  two transfers, a receipt, an outbox event;
- ``POST /_bench/commit``, the baseline: the same ``Endpoint`` pipeline (rate limit,
  wallet-key authentication, idempotency record, one write transaction) inserting one row.

The ratio pay/baseline isolates what the payment logic costs on top of the pipeline.  Each
route's time is split in two halves run in A B B A order (the first route alternating from
one concurrency level to the next), so slow drift in the machine hits both alike; the
latency percentiles pool both halves from wrk's own histograms.

Why wrk: a Python client (httpx) spends hundreds of microseconds of CPU per request, on
the cores the server and the database need; wrk spends a few, so the numbers are the
server's.  After the runs the bench checks the books: the receipts equal the payments
answered 200 (plus at most the requests wrk abandoned in flight when its time ran out),
each under an idempotency record of its own, the wallet key's balance fell by exactly
their price, and the ledger audit finds nothing: a lost or doubled payment under load
fails the run.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import resource
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    bench_parser,
    chosen_databases,
    fail,
    fresh_database,
    funded_wallet_key,
    ms,
    new_seller,
    post_json,
    print_heading,
    process_cpu_seconds,
    progress,
    ratio,
    reference_server,
    report_cell_failures,
    require_tools,
    versions_line,
)
from _report import row
from sqlalchemy import func, select

from reference_server.domain import ledger
from reference_server.store import Database
from reference_server.store import tables as t

CONCURRENCY = (1, 8, 32)
#: The issue's targets: throughput >= 0.6 x the baseline's at every concurrency, and the
#: p99 at the highest concurrency on PostgreSQL under 100 ms.
RATIO_TARGET = 0.6
P99_TARGET_MS = 100.0
#: wrk counts time in whole seconds: each route's time in a cell is two halves of
#: ``--seconds / 2`` (at least 1 s each).
DEFAULT_SECONDS = 4
QUICK_SECONDS = 2
WARM_UP_SECONDS = 1
PRICE = "0.01"
PRICE_MICROS = 10_000
FUNDING = "100000.00"  # ten million pays at PRICE
FUNDING_MICROS = 100_000 * 1_000_000
ROUTES = ("pay", "commit")
#: The percentiles read from each wrk run's latency histogram (1-point steps, then
#: 0.1-point steps above 90), from which both halves' percentiles are pooled.
GRID = (*range(1, 90), *(q / 10 for q in range(900, 1001)))

#: The wrk script.  ``init`` gets the run's token, the wallet key and the JSON body after
#: ``--``; each thread numbers its requests, so every Idempotency-Key is new.  ``done``
#: prints what the Python side reads: the answers by kind and the latency percentiles (µs).
WRK_SCRIPT = """
local threads = {}
-- wrk also calls request() once in its main state, to check it, without init().
prefix, sent, ok, refused, example = "", 0, 0, 0, ""

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  prefix = args[1] .. "-" .. id .. "-"
  sent, ok, refused, example = 0, 0, 0, ""
  wrk.method = "POST"
  wrk.body = args[3]
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. args[2]
end

function request()
  sent = sent + 1
  wrk.headers["Idempotency-Key"] = prefix .. sent
  return wrk.format()
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
  else
    refused = refused + 1
    if example == "" then
      example = status .. " " .. string.sub(body, 1, 300)
    end
  end
end

function done(summary, latency, requests)
  local sent_, ok_, refused_ = 0, 0, 0
  for _, thread in ipairs(threads) do
    sent_ = sent_ + thread:get("sent")
    ok_ = ok_ + thread:get("ok")
    refused_ = refused_ + thread:get("refused")
    local e = thread:get("example")
    if e ~= "" then
      io.write("svc-refused ", (string.gsub(e, "%s", " ")), "\\n")
    end
  end
  local errors = summary.errors
  io.write(string.format("svc-counts %d %d %d %d %d %d\\n", sent_, ok_, refused_,
    summary.requests, summary.duration, errors.connect + errors.read + errors.write
    + errors.timeout))
  for _, q in ipairs({%GRID%}) do
    io.write(string.format("svc-latency %g %d\\n", q, latency:percentile(q)))
  end
end
""".replace("%GRID%", ", ".join(f"{q:g}" for q in GRID))


@attrs.frozen
class Run:
    """One wrk run of one route: its answers, the latency percentiles, the CPU spent."""

    sent: int
    ok: int
    refused: int
    socket_errors: int
    seconds: float
    #: Completed requests (wrk's latency histogram counts these).
    completed: int
    #: Percentile (0-100) -> latency in seconds, read from wrk's histogram.
    latency: dict[float, float]
    examples: list[str]
    server_cpu: float | None
    client_cpu: float


@attrs.define
class Sample:
    """What one route did in one cell, over its two halves (and its warm-up's errors)."""

    runs: list[Run] = attrs.Factory(list)
    errors: int = 0
    error_examples: list[str] = attrs.Factory(list)

    @property
    def ok(self) -> int:
        return sum(r.ok for r in self.runs)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    @property
    def throughput(self) -> float:
        return self.ok / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        """The halves' latencies pooled, in seconds: the least value of any half's grid
        at which the request-weighted share of latencies at or below it reaches ``q``."""
        total = sum(r.completed for r in self.runs)
        if not total:
            return float("nan")
        grids = [(r.completed, sorted(r.latency), sorted(r.latency.values())) for r in self.runs]

        def share_at_most(x: float) -> float:
            shares = 0.0
            for completed, quantiles, values in grids:
                below = bisect.bisect_right(values, x)  # values rise with the quantile
                shares += completed * (quantiles[below - 1] / 100 if below else 0.0)
            return shares / total

        candidates = sorted({v for _, _, values in grids for v in values})
        return next((x for x in candidates if share_at_most(x) >= q), candidates[-1])

    @property
    def cpu_ms_per_request(self) -> float | None:
        cpu = [r.server_cpu for r in self.runs]
        if any(c is None for c in cpu) or not self.ok:
            return None
        return sum(c for c in cpu if c is not None) / self.ok * 1e3

    @property
    def client_cpu_ms_per_request(self) -> float:
        return sum(r.client_cpu for r in self.runs) / self.ok * 1e3 if self.ok else float("nan")


@attrs.frozen
class Setup:
    wallet_key: str
    wallet_key_id: str
    resource_id: str


# --- set-up over plain HTTP ---------------------------------------------------------


def set_up(url: str) -> Setup:
    """A seller selling one resource at PRICE, and a wallet key funded with FUNDING."""
    with httpx.Client(base_url=url, timeout=30) as http:
        seller_key = new_seller(http)["seller_key"]
        sold = post_json(
            http,
            "/resources",
            {"kind": "http", "path": "/v1/report", "amount": PRICE},
            Authorization=f"Bearer {seller_key}",
        )
        key = funded_wallet_key(http, FUNDING)
    return Setup(wallet_key=key["key"], wallet_key_id=key["id"], resource_id=sold["id"])


# --- the load ---------------------------------------------------------------------


_COUNTS = re.compile(r"^svc-counts (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)$", re.MULTILINE)
_LATENCY = re.compile(r"^svc-latency ([\d.]+) (\d+)$", re.MULTILINE)
_REFUSED = re.compile(r"^svc-refused (.*)$", re.MULTILINE)


@attrs.define
class Load:
    """Everything wrk did against one server, for the books check at the end."""

    url: str
    pid: int
    setup: Setup
    script: Path
    threads: int
    pay_runs: list[Run] = attrs.Factory(list)

    def run(self, route: str, connections: int, seconds: int, sample: Sample) -> Run:
        """One closed-loop wrk run of ``route`` with ``connections`` keep-alive
        connections; its failures join ``sample``'s."""
        pay = route == "pay"
        path = "/pay" if pay else "/_bench/commit"
        body = {"resource_id": self.setup.resource_id} if pay else {}
        command = [
            "wrk",
            f"-t{min(self.threads, connections)}",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout",
            "60s",
            "--latency",
            "-s",
            str(self.script),
            self.url + path,
            "--",
            secrets.token_hex(8),  # this run's Idempotency-Keys differ from every other's
            self.setup.wallet_key,
            json.dumps(body),
        ]
        cpu_before = process_cpu_seconds(self.pid)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_after = process_cpu_seconds(self.pid)
        counts = _COUNTS.search(done.stdout)
        if done.returncode != 0 or counts is None:
            raise SystemExit(f"wrk failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        sent, ok, refused, completed, duration_us, socket_errors = map(int, counts.groups())
        client_cpu = (children_after.ru_utime + children_after.ru_stime) - (
            children_before.ru_utime + children_before.ru_stime
        )
        examples = [f"POST {path}: {m}" for m in _REFUSED.findall(done.stdout)]
        if socket_errors:
            examples.append(f"POST {path}: {socket_errors} socket error(s) (wrk: {done.stdout!r})")
        run = Run(
            sent=sent,
            ok=ok,
            refused=refused,
            socket_errors=socket_errors,
            seconds=duration_us / 1e6,
            completed=completed,
            latency={float(q): int(us) / 1e6 for q, us in _LATENCY.findall(done.stdout)},
            examples=examples,
            server_cpu=None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
            client_cpu=client_cpu,
        )
        if pay:
            self.pay_runs.append(run)
        sample.errors += refused + socket_errors
        sample.error_examples += examples
        return run


def measure_cell(
    load: Load, concurrency: int, half: int, first: str, warm: bool
) -> dict[str, Sample]:
    """Both routes at one concurrency: a short warm-up each (``warm``), then halves in
    A B B A order."""
    second = ROUTES[1] if first == ROUTES[0] else ROUTES[0]
    samples = {route: Sample() for route in ROUTES}
    if warm:
        for route in (first, second):
            load.run(route, concurrency, WARM_UP_SECONDS, samples[route])  # errors count
    for route in (first, second, second, first):
        samples[route].runs.append(load.run(route, concurrency, half, samples[route]))
    return samples


# --- the books ---------------------------------------------------------------------


def check_books(database_url: str, load: Load) -> tuple[str, list[str]]:
    """What the books hold after the runs, and what is wrong with them (``[]``: nothing).

    wrk stops when its time is up with up to one request per connection unanswered; the
    server still runs those, so the receipts lie between the payments answered 200 and
    the requests sent (less those refused)."""
    ok = sum(r.ok for r in load.pay_runs)
    most = sum(r.sent - r.refused for r in load.pay_runs)
    receipts = t.receipts
    keys = t.idempotency_keys
    db = Database(database_url)
    try:
        count = select(func.count()).where(receipts.c.resource_id == load.setup.resource_id)
        paid = select(func.count()).where(
            keys.c.route == "POST /pay", keys.c.state == "done", keys.c.response_status == 200
        )
        last, deadline = -1, time.monotonic() + 30
        while time.monotonic() < deadline:  # until the unanswered ones are done
            with db.read() as conn:
                n = int(conn.execute(count).scalar_one())
            if n == last:
                break
            last = n
            time.sleep(0.5)
        with db.read() as conn:
            n = int(conn.execute(count).scalar_one())
            answers = int(conn.execute(paid).scalar_one())
            balance = ledger.balance_micros(
                conn, environment="test", kind=ledger.WALLET_KEY, ref_id=load.setup.wallet_key_id
            )
            problems = ledger.audit(conn, "test")
    finally:
        db.dispose()
    if not ok <= n <= most:
        problems.append(f"{n} receipts, but {ok} payments answered 200 of {most} sent")
    if answers != n:
        problems.append(f"{n} receipts, but {answers} Idempotency-Keys answered 200 by /pay")
    if balance != FUNDING_MICROS - n * PRICE_MICROS:
        problems.append(
            f"the wallet key holds {balance} micros, not {FUNDING_MICROS} - {n} x {PRICE_MICROS}"
        )
    return f"{n} receipts; {ok} payments answered 200, {most} sent and not refused", problems


def run_database(
    name: str, database_url: str, seconds: int, threads: int, warm_every_cell: bool
) -> tuple[list[dict[str, Sample]], list[str]]:
    """The cells of one database, and what the books check found wrong."""
    half = max(1, seconds // 2)
    with tempfile.TemporaryDirectory(prefix="svc-bench-") as tmp:
        log_path = Path(tmp) / "server.log"
        script = Path(tmp) / "pay.lua"
        script.write_text(WRK_SCRIPT)
        baseline_server = Path(__file__).with_name("_baseline_server.py")
        with reference_server(database_url, log_path, script=baseline_server) as (url, server):
            load = Load(url, server.pid, set_up(url), script, threads)
            cells = []
            for i, concurrency in enumerate(CONCURRENCY):
                progress(f"{name}: {concurrency} client(s)...")
                warm = warm_every_cell or i == 0
                cells.append(measure_cell(load, concurrency, half, ROUTES[i % 2], warm))
            held, problems = check_books(database_url, load)
        progress(f"{name}: {held}")
        return cells, problems


# --- report ---------------------------------------------------------------------


def cpu(sample: Sample) -> str:
    value = sample.cpu_ms_per_request
    return "-" if value is None else f"{value:.2f}"


def print_table(results: dict[str, list[dict[str, Sample]]], header: list[str]) -> None:
    columns = (
        f"{'database':<10} {'clients':>7} | {'pay/s':>7} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'cpu ms':>6} | {'base/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms':>6}"
        f" | {'thr':>5} {'p50':>5} {'p99':>5} | {'errors':>6}"
    )
    above = (
        f"{'':<10} {'':>7} | {'POST /pay':<30} | {'POST /_bench/commit (baseline)':<30}"
        f" | {'pay / baseline':<17} |"
    )
    print_heading(header, above, columns)
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
    print("latency (above 1: /pay is slower), from wrk's histograms.  cpu ms = the server")
    print("process's CPU per request (the database's own processes not counted).  wrk's CPU")
    print("per request, pay / baseline, at " + " / ".join(map(str, CONCURRENCY)) + " clients:")
    for name, cells in results.items():
        shares = ", ".join(
            f"{cell['pay'].client_cpu_ms_per_request:.2f} / "
            f"{cell['commit'].client_cpu_ms_per_request:.2f}"
            for cell in cells
        )
        print(f"  {name}: {shares} ms")


def json_rows(results: dict[str, list[dict[str, Sample]]]) -> list[dict[str, Any]]:
    """The figures of the issue's table, one row each (the bench JSON protocol)."""
    rows: list[dict[str, Any]] = []
    for name, cells in results.items():
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True):
            pay, base = cell["pay"], cell["commit"]
            ratio = pay.throughput / base.throughput if base.throughput else None
            rows.append(
                row(
                    "POST /pay throughput",
                    database=name,
                    setting=f"{concurrency} client{'s' if concurrency > 1 else ''}",
                    value=round(pay.throughput, 1),
                    unit="req/s",
                    baseline_name="one-row commit, same pipeline",
                    baseline=round(base.throughput, 1),
                    ratio=None if ratio is None else round(ratio, 3),
                    target=f">= {RATIO_TARGET}",
                    met=ratio is not None and ratio >= RATIO_TARGET,
                )
            )
        if name == "postgresql":
            p99 = cells[-1]["pay"].percentile(0.99) * 1e3
            rows.append(
                row(
                    "POST /pay p99",
                    database=name,
                    setting=f"{CONCURRENCY[-1]} clients",
                    value=round(p99, 1),
                    unit="ms",
                    target=f"< {P99_TARGET_MS:g} ms",
                    met=p99 < P99_TARGET_MS,
                )
            )
    return rows


def main() -> None:
    parser = bench_parser(
        __doc__,
        f"a short run ({QUICK_SECONDS} s per route and cell, one warm-up per database)",
        "sqlite,postgresql",
    )
    parser.add_argument(
        "--seconds",
        type=int,
        default=DEFAULT_SECONDS,
        help="per route and cell, in two halves of whole seconds",
    )
    parser.add_argument("--threads", type=int, default=1, help="wrk -t (at most the clients)")
    args = parser.parse_args()
    if args.quick:
        args.seconds = QUICK_SECONDS
    databases = chosen_databases(parser, args)
    require_tools("wrk")
    half = max(1, args.seconds // 2)

    cores = os.cpu_count() or 0
    header = [
        "POST /pay vs POST /_bench/commit (one row committed through the same pipeline)",
        versions_line(databases, args.postgres_url)
        + f"; wrk -t{args.threads}, closed loop at {' / '.join(map(str, CONCURRENCY))}"
        " connections,",
        f"2 x {half} s per route and cell (A B B A), a fresh Idempotency-Key per request,",
        f"one wallet key, a resource priced {PRICE}.",
        f"wrk, the server (one uvicorn process) and the database share this machine's {cores}"
        " cores:",
        "read the ratios; the absolute numbers are not capacity.",
    ]

    results: dict[str, list[dict[str, Sample]]] = {}
    books: list[str] = []
    for name in databases:
        with fresh_database(name, args.postgres_url) as database_url:
            results[name], problems = run_database(
                name, database_url, args.seconds, args.threads, not args.quick
            )
            books += [f"{name}: {problem}" for problem in problems]

    print_table(results, header)
    if args.json:
        args.json.write_text(json.dumps(json_rows(results), indent=2) + "\n")
    if books:
        fail("The books do not balance after the runs:", books)
    print("\nThe books balance: every payment answered 200 has its receipt and its price")
    print("left the wallet key once; the ledger audit finds nothing.")
    report_cell_failures(results)


if __name__ == "__main__":
    main()

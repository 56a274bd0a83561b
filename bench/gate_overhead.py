"""Requests/s through ``svc_asgi.PaymentGate`` with a known receipt, as a ratio to the same
app without the gate, measured in the same run with ``wrk`` (a C load generator).

Run: ``python bench/gate_overhead.py`` (about 1.5 minutes with the defaults; ``--quick``
about 30 s; needs the ``[server]`` extras and ``wrk``: ``apt-get install wrk``).

The bench starts a reference server (``python -m reference_server run``, a fresh SQLite
file) and, over the SDK, sets up a seller selling ``GET /v1/report`` at 0.01 and an agent
who pays it once: that receipt is sent with every request.  Then it starts four uvicorn
servers, each its own process on loopback (this script with ``--serve``):

- ``starlette``: a Starlette app whose ``GET /v1/report`` answers a small JSON document;
- ``starlette+gate``: the same app wrapped in ``PaymentGate(prices={"GET /v1/report": …})``;
- ``bare`` and ``bare+gate``: the same with a bare ASGI callable instead of Starlette,
  the harshest comparison (the app itself costs next to nothing).

Why wrk: a load client written in Python spends as much CPU per request as the server it
loads, on the same cores, so its own noise swamps a difference of a few percent; wrk's
per-request cost is a small fraction of uvicorn's.  Each server is warmed up (the gated
server's first request verifies the receipt with the service; later ones are decided from
the gate's memory), then loaded by ``wrk -t THREADS -c CONNECTIONS`` (keep-alive
HTTP/1.1, closed loops).  Each pair is measured in ``--rounds`` rounds of ``--seconds``
per variant, alternating which goes first (A B, B A, ...); each round gives one
gated/plain ratio and the table shows the median ratio, so that the drift and bursts of a
shared machine, which move whole seconds up and down, cancel instead of landing on one
variant.  Both variants receive byte-identical requests (the receipt header included).
After the run each gated server reports how often it asked the service
(``POST /access/verify``): once, so the measured requests were all decided from memory.

With ``--pin`` (Linux, two CPUs or more) the app servers are pinned to CPU 1 and wrk to
CPU 0; on a machine shared with other work, leaving placement to the scheduler is usually
steadier.  The server's CPU time per request (from ``/proc``) is shown beside each rate:
its ratio is what the throughput ratio would be on a core of the server's own.

A second table measures what the gate adds per request without any network: the same
apps called in process, directly through ASGI, many thousands of times, as microseconds
per request; this isolates the gate's own CPU cost from the HTTP server's.

``--json PATH`` writes the two rows of the issue's table (bare ASGI, Starlette) in the
bench JSON protocol; the script exits non-zero if any request failed (a non-2xx answer or
a socket error) or a gated server asked the service more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    free_port,
    process_cpu_seconds,
    serving,
    sqlite_database,
)

import svc

PRICE = "0.01"
VARIANTS = ("starlette", "starlette+gate", "bare", "bare+gate")
PAIRS = (("starlette", "starlette+gate"), ("bare", "bare+gate"))
TARGET = 0.95
#: The issue's names of the two app kinds.
KINDS = {"bare": "bare ASGI", "starlette": "Starlette"}
#: Long enough that the whole run is served from the cache (the default, 60 s, would
#: add one verify call per minute: nothing measurable, but not what is measured here).
CACHE_TTL = 3600.0
_BODY = json.dumps({"report": "all systems nominal", "rows": list(range(20))}).encode()


# --- the apps (run in the --serve processes) ---------------------------------------------


class CountingTransport(httpx.AsyncBaseTransport):
    """The gate's own connection to the service, counting what it asks."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls[f"{request.method} {request.url.path}"] += 1
        return await self.inner.handle_async_request(request)


def build_app(variant: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from svc_asgi import PaymentGate

    counting = CountingTransport()

    async def stats_body() -> bytes:
        return json.dumps(dict(counting.calls)).encode()

    if variant.startswith("starlette"):

        async def report(request: Request) -> Response:
            return Response(_BODY, media_type="application/json")

        async def stats(request: Request) -> Response:
            return JSONResponse(dict(counting.calls))

        app: Any = Starlette(routes=[Route("/v1/report", report), Route("/_stats", stats)])
    else:

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            body = await stats_body() if scope["path"] == "/_stats" else _BODY
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

    if variant.endswith("+gate"):
        client = svc.AsyncClient(
            base_url=os.environ["SVC_BASE_URL"],
            seller_key=os.environ["SVC_SELLER_KEY"],
            transport=counting,
            max_retries=0,
        )
        app = PaymentGate(
            app,
            prices={"GET /v1/report": os.environ["BENCH_RESOURCE_ID"]},
            client=client,
            cache_ttl=CACHE_TTL,
        )
    return app


def pin(cpu: int) -> None:
    """Keep this process on one CPU (Linux, two CPUs or more); a no-op elsewhere."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {cpu})


def serve(variant: str, port: int, pinned: bool) -> None:
    import uvicorn

    if pinned:
        pin(1)

    uvicorn.run(
        build_app(variant),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


# --- processes ------------------------------------------------------------------------------


@contextmanager
def process(args: list[str], env: dict[str, str], url: str, log: Path) -> Iterator[tuple[str, int]]:
    with serving(args, env, url, log, any_status=True) as proc:
        yield url, proc.pid


def set_up(url: str) -> tuple[str, str, str]:
    """(seller key, resource id, receipt id): a seller selling GET /v1/report, paid once."""
    with svc.Client(base_url=url, environment="test") as anon:
        owner = anon.owners.create(f"bench+{secrets.token_hex(4)}@example.com")
    with svc.Client(base_url=url, owner_jwt=owner.owner_jwt, environment="test") as oc:
        seller = oc.sellers.create(name="bench shop")
        key = oc.wallet_keys.create(name="bench agent")
        oc.wallet_keys.fund(key.id, "1.00")
    with svc.Client(base_url=url, seller_key=seller.seller_key) as sc:
        resource = sc.resources.create(kind="http", path="/v1/report", amount=PRICE)
    with svc.Client(base_url=url, wallet_key=key.key) as agent:
        paid = agent.pay(resource_id=resource.id)
    return seller.seller_key, resource.id, paid.receipt_id


# --- the load ---


@attrs.frozen
class WrkRun:
    """One ``wrk`` run against one server: what it counted, and the server's CPU time."""

    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    #: Non-2xx/3xx answers plus socket errors (connect, read, write, timeout).
    errors: int
    cpu_seconds: float | None


_UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_LATENCY_LINE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.MULTILINE)
_DONE = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m),")
_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


def parse_wrk(output: str) -> tuple[int, float, float, float, float, int]:
    """``(requests, seconds, requests/s, p50 ms, p99 ms, errors)`` from wrk's report
    (run with ``--latency``); stops the bench if the report is not wrk's."""
    done = _DONE.search(output)
    rps = _RPS.search(output)
    if done is None or rps is None:
        raise SystemExit(f"wrk's output was not understood:\n{output}")
    latencies = {q: float(v) * _UNIT_MS[u] for q, v, u in _LATENCY_LINE.findall(output)}
    errors = sum(int(n) for n in _NON_2XX.findall(output))
    errors += sum(sum(int(n) for n in m) for m in _SOCKET_ERRORS.findall(output))
    seconds = float(done.group(2)) * _UNIT_MS[done.group(3)] / 1000
    return (
        int(done.group(1)),
        seconds,
        float(rps.group(1)),
        latencies.get("50", math.nan),
        latencies.get("99", math.nan),
        errors,
    )


def wrk(
    port: int,
    pid: int,
    receipt_id: str,
    *,
    seconds: int,
    connections: int,
    threads: int,
    cpu: int | None,
) -> WrkRun:
    """Load ``GET /v1/report`` on ``port`` with wrk's keep-alive connections, every
    request bearing the receipt (gated and plain servers get the same bytes)."""
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-H",
        "Accept: application/json",
        "-H",
        f"X-Svc-Receipt: {receipt_id}",
        f"http://127.0.0.1:{port}/v1/report",
    ]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    before = process_cpu_seconds(pid)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    after = process_cpu_seconds(pid)
    if done.returncode != 0:
        raise SystemExit(f"wrk failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    requests, elapsed, rps, p50, p99, errors = parse_wrk(done.stdout)
    return WrkRun(
        requests=requests,
        seconds=elapsed,
        rps=rps,
        p50_ms=p50,
        p99_ms=p99,
        errors=errors,
        cpu_seconds=None if before is None or after is None else after - before,
    )


def in_process(variant: str, receipt_id: str, calls: int) -> float:
    """Microseconds per request of an app called directly through ASGI (no network).

    The gated app's first call verifies the receipt with the service, as a server's first
    request would; the timed calls are served from the gate's cache.
    """
    app = build_app(variant)
    headers = [
        (b"host", b"127.0.0.1"),
        (b"user-agent", b"bench"),
        (b"accept", b"application/json"),
        (b"x-svc-receipt", receipt_id.encode()),
    ]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    def scope() -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/v1/report",
            "raw_path": b"/v1/report",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }

    async def run() -> float:
        await app(scope(), receive, send)  # the gated app verifies once, over the network
        started = time.perf_counter()
        for _ in range(calls):
            await app(scope(), receive, send)
        elapsed = time.perf_counter() - started
        if set(statuses) != {200}:
            raise SystemExit(f"{variant}: in-process statuses {sorted(set(statuses))}")
        return elapsed / calls * 1e6

    return asyncio.run(run())


def cpu_us_per_request(runs: list[WrkRun]) -> float | None:
    """The server's CPU time per answered request over ``runs`` (``None``: not on Linux)."""
    if any(r.cpu_seconds is None for r in runs):
        return None
    done = sum(r.requests for r in runs)
    return sum(r.cpu_seconds or 0.0 for r in runs) / done * 1e6 if done else None


def _rps(runs: list[WrkRun]) -> float:
    return sum(r.requests for r in runs) / sum(r.seconds for r in runs)


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=2, help="per variant and round (wrk -d)")
    parser.add_argument("--connections", type=int, default=16, help="wrk -c")
    parser.add_argument("--threads", type=int, default=1, help="wrk -t")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pin", action="store_true", help="servers on CPU 1, wrk on CPU 0")
    parser.add_argument("--calls", type=int, default=50_000, help="in-process calls per app")
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--json", type=Path, help="also write the bench rows (JSON) here")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.pin)
        return
    if args.quick:
        args.seconds, args.rounds, args.calls = 1, 4, min(args.calls, 5_000)
    if shutil.which("wrk") is None:
        raise SystemExit("this bench needs wrk (Debian/Ubuntu: apt-get install wrk)")

    with (
        tempfile.TemporaryDirectory() as tmp,
        sqlite_database() as database_url,
        ExitStack() as stack,
    ):
        tmpdir = Path(tmp)
        service_port = free_port()
        service = stack.enter_context(
            process(
                [sys.executable, "-m", "reference_server", "run", "--port", str(service_port)],
                {
                    **os.environ,
                    "SVC_DATABASE_URL": database_url,
                    "SVC_RATE_LIMIT": "1000000/second",
                },
                f"http://127.0.0.1:{service_port}/ready",
                tmpdir / "service.log",
            )
        )[0].removesuffix("/ready")
        seller_key, resource_id, receipt_id = set_up(service)
        env = {
            **os.environ,
            "SVC_BASE_URL": service,
            "SVC_SELLER_KEY": seller_key,
            "BENCH_RESOURCE_ID": resource_id,
        }
        ports, pids = _start_variants(stack, env, tmpdir, pinned=args.pin)

        def load(variant: str, seconds: int) -> WrkRun:
            return wrk(
                ports[variant],
                pids[variant],
                receipt_id,
                seconds=seconds,
                connections=args.connections,
                threads=args.threads,
                cpu=0 if args.pin else None,
            )

        for variant in VARIANTS:  # warm up: the gate verifies once and remembers
            if args.quick:
                httpx.get(
                    f"http://127.0.0.1:{ports[variant]}/v1/report",
                    headers={"X-Svc-Receipt": receipt_id},
                ).raise_for_status()
            else:
                load(variant, 1)

        results, ratios = _alternating_rounds(args.rounds, args.seconds, load)

        os.environ.update(
            {k: env[k] for k in ("SVC_BASE_URL", "SVC_SELLER_KEY", "BENCH_RESOURCE_ID")}
        )
        micros = {v: in_process(v, receipt_id, args.calls) for v in VARIANTS}
        verify_calls = {
            v: httpx.get(f"http://127.0.0.1:{ports[v]}/_stats").json().get("POST /access/verify", 0)
            for v in VARIANTS
            if v.endswith("+gate")
        }

    rows = _report(args, results, ratios, micros, verify_calls)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    errors = sum(r.errors for runs in results.values() for r in runs)
    if errors or any(n != 1 for n in verify_calls.values()):
        raise SystemExit(
            f"{errors} failed request(s) or unexpected verify calls {verify_calls}: see the table"
        )


def _report(
    args: argparse.Namespace,
    results: dict[str, list[WrkRun]],
    ratios: dict[str, list[float]],
    micros: dict[str, float],
    verify_calls: dict[str, int],
) -> list[dict[str, Any]]:
    """Print the tables; the JSON rows (one per app kind)."""
    print(
        f"\nsvc_asgi.PaymentGate overhead, known receipt: wrk {args.threads} thread(s), "
        f"{args.connections} keep-alive connections, {args.rounds} alternating rounds of "
        f"{args.seconds} s per variant{', pinned' if args.pin else ''}; uvicorn "
        f"{_version('uvicorn')} (one process each), Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs\n"
    )
    header = (
        f"{'app':<16}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>8}"
        f"{'ratio':>7}{'min..max':>12}{'server CPU/req':>16}{'CPU ratio':>10}  verifies"
    )
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for plain, gated in PAIRS:
        base_cpu = cpu_us_per_request(results[plain])
        for variant in (plain, gated):
            runs = results[variant]
            cpu = cpu_us_per_request(runs)
            p50 = statistics.median(r.p50_ms for r in runs)
            p99 = statistics.median(r.p99_ms for r in runs)
            errors = sum(r.errors for r in runs)
            if variant == gated:
                ratio = statistics.median(ratios[gated])
                spread = f"{min(ratios[gated]):.2f}..{max(ratios[gated]):.2f}"
                calls = str(verify_calls[variant])
                cpu_ratio = f"{base_cpu / cpu:.3f}" if cpu and base_cpu else "n/a"
                rows.append(
                    {
                        "measure": f"gate with known receipt, {KINDS[plain]}",
                        "database": "-",
                        "setting": f"wrk -t{args.threads} -c{args.connections}, uvicorn",
                        "value": round(_rps(runs), 1),
                        "unit": "req/s",
                        "baseline_name": f"same {KINDS[plain]} app ungated",
                        "baseline": round(_rps(results[plain]), 1),
                        "ratio": round(ratio, 3),
                        "target": f">= {TARGET}",
                        "met": ratio >= TARGET,
                    }
                )
            else:
                ratio, spread, calls, cpu_ratio = 1.0, "", "-", "1.000"
            cpu_text = f"{cpu:.0f} us" if cpu is not None else "n/a"
            print(
                f"{variant:<16}{_rps(runs):>8.0f}{p50:>8.2f}{p99:>8.2f}{errors:>8}"
                f"{ratio:>7.3f}{spread:>12}{cpu_text:>16}{cpu_ratio:>10}  {calls}"
            )
    print(
        "\nratio: median over the rounds of gated req/s / plain req/s in the same round;"
        "\nCPU ratio: plain / gated server CPU time per request (the throughput ratio on a"
        "\ncore of its own, unaffected by what else the machine runs)"
    )
    print(f"\nin process (ASGI calls, no server, no network), {args.calls} calls each:\n")
    header = f"{'app':<16}{'us/request':>12}{'gate adds':>12}"
    print(header)
    print("-" * len(header))
    for plain, gated in PAIRS:
        print(f"{plain:<16}{micros[plain]:>12.2f}{'':>12}")
        print(f"{gated:<16}{micros[gated]:>12.2f}{micros[gated] - micros[plain]:>10.2f}us")
    worst = min(row["ratio"] for row in rows)
    verdict = "meets" if worst >= TARGET else "MISSES"
    print(f"\nworst median ratio {worst:.3f}: {verdict} the >= {TARGET} target")
    return rows


def _start_variants(
    stack: ExitStack, env: dict[str, str], tmpdir: Path, *, pinned: bool
) -> tuple[dict[str, int], dict[str, int]]:
    """One uvicorn process per variant (stopped with ``stack``): their ports and pids."""
    ports: dict[str, int] = {}
    pids: dict[str, int] = {}
    for variant in VARIANTS:
        ports[variant] = free_port()
        _, pids[variant] = stack.enter_context(
            process(
                [
                    sys.executable,
                    __file__,
                    "--serve",
                    variant,
                    "--port",
                    str(ports[variant]),
                    *(["--pin"] if pinned else []),
                ],
                env,
                f"http://127.0.0.1:{ports[variant]}/_stats",
                tmpdir / f"{variant}.log",
            )
        )
    return ports, pids


def _alternating_rounds(
    rounds: int, seconds: int, load: Callable[[str, int], WrkRun]
) -> tuple[dict[str, list[WrkRun]], dict[str, list[float]]]:
    """Each variant's runs, and each gated variant's per-round ratio to its plain twin:
    the two take turns going first, so drift on a shared machine falls on both alike."""
    results: dict[str, list[WrkRun]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {gated: [] for _, gated in PAIRS}
    for plain, gated in PAIRS:
        for round_ in range(rounds):
            order = (plain, gated) if round_ % 2 == 0 else (gated, plain)
            done = {v: load(v, seconds) for v in order}
            for variant, run in done.items():
                results[variant].append(run)
            ratios[gated].append(done[gated].rps / done[plain].rps)
    return results, ratios


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()

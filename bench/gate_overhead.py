"""Requests/s through ``svc_asgi.PaymentGate`` with a cached receipt, as a ratio to the same
app without the gate, measured in the same run.

Run: ``python bench/gate_overhead.py`` (about 40 s with the defaults; needs the
``[server]`` extras).

The bench starts a reference server (``python -m reference_server run``, a fresh SQLite
file) and, over the SDK, sets up a seller selling ``GET /v1/report`` at 0.01 and an agent
who pays it once: that receipt is sent with every request.  Then it starts four uvicorn
servers, each its own process on loopback (this script with ``--serve``):

- ``starlette``: a Starlette app whose ``GET /v1/report`` answers a small JSON document;
- ``starlette+gate``: the same app wrapped in ``PaymentGate(prices={"GET /v1/report": …})``;
- ``bare`` and ``bare+gate``: the same with a bare ASGI callable instead of Starlette,
  the harshest comparison (the app itself costs next to nothing).

Each pair is warmed up (the gated server's first request verifies the receipt with the
service; later ones hit the gate's cache), then loaded with ``--connections`` keep-alive
HTTP/1.1 connections in closed loops by a small raw-socket client in this process.  The
pair is measured in ``--rounds`` rounds of ``--seconds`` per variant, alternating which
goes first (A B, B A, ...); each round gives one gated/plain ratio and the table shows
the median ratio, so that the drift and bursts of a shared machine, which move whole
seconds up and down, cancel instead of landing on one variant.  Both variants receive
byte-identical requests (the receipt header included).  After the run each gated server
reports how often it asked the service (``POST /access/verify``), to show that the
measured requests were served from the cache.

With ``--pin`` (Linux, two CPUs or more) the app servers are pinned to one CPU and the load
client to another; on a machine shared with other work, leaving placement to the
scheduler is usually steadier.

A second table measures what the gate adds per request without any network: the same
apps called in process, directly through ASGI, many thousands of times, as microseconds
per request; this isolates the gate's own CPU cost from the HTTP server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

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
TARGET = 0.85
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


# --- the load -------------------------------------------------------------------------------


async def _connection(
    port: int, request: bytes, stop_at: float, latencies: list[float], bad: Counter[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    clock = time.perf_counter
    try:
        while clock() < stop_at:
            started = clock()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            lowered = head.lower()
            at = lowered.index(b"content-length:") + len(b"content-length:")
            length = int(lowered[at : lowered.index(b"\r\n", at)])
            await reader.readexactly(length)
            latencies.append(clock() - started)
            if status != 200:
                bad[status] += 1
    finally:
        writer.close()


def load(port: int, request: bytes, connections: int, seconds: float) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        latencies: list[float] = []
        bad: Counter[int] = Counter()
        started = time.perf_counter()
        stop_at = started + seconds
        await asyncio.gather(
            *(_connection(port, request, stop_at, latencies, bad) for _ in range(connections))
        )
        return {
            "latencies": latencies,
            "seconds": time.perf_counter() - started,
            "bad": bad,
        }

    return asyncio.run(run())


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


def cpu_us_per_request(runs: list[dict[str, Any]]) -> float | None:
    if any(r.get("cpu") is None for r in runs):
        return None
    done = sum(len(r["latencies"]) for r in runs)
    return sum(r["cpu"] for r in runs) / done * 1e6 if done else None


def _rps(runs: list[dict[str, Any]]) -> float:
    done = sum(len(r["latencies"]) for r in runs)
    return done / sum(r["seconds"] for r in runs)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else math.nan


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="per variant and round")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--pin", action="store_true", help="pin servers and client to CPUs")
    parser.add_argument("--calls", type=int, default=50_000, help="in-process calls per app")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.pin)
        return

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
        request = (
            "GET /v1/report HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\n"
            f"Accept: application/json\r\nX-Svc-Receipt: {receipt_id}\r\n\r\n"
        ).encode()
        if args.pin:
            pin(0)  # the load client; the app servers are on CPU 1
        for variant in VARIANTS:  # warm up: the gate verifies once and caches
            load(ports[variant], request, args.connections, 1.0)

        results, ratios = _alternating_rounds(args, ports, pids, request)

        os.environ.update(
            {k: env[k] for k in ("SVC_BASE_URL", "SVC_SELLER_KEY", "BENCH_RESOURCE_ID")}
        )
        micros = {v: in_process(v, receipt_id, args.calls) for v in VARIANTS}
        verify_calls = {
            v: httpx.get(f"http://127.0.0.1:{ports[v]}/_stats").json().get("POST /access/verify", 0)
            for v in VARIANTS
            if v.endswith("+gate")
        }

    def summary(variant: str) -> tuple[float, float, float, int]:
        runs = results[variant]
        latencies = [x for r in runs for x in r["latencies"]]
        bad = sum(sum(r["bad"].values()) for r in runs)
        return _rps(runs), percentile(latencies, 0.5), percentile(latencies, 0.99), bad

    print(
        f"\nsvc_asgi.PaymentGate overhead, cached receipt: {args.connections} keep-alive "
        f"connections, {args.rounds} alternating rounds of {args.seconds:g} s per variant; uvicorn "
        f"{_version('uvicorn')} (one process each), Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs\n"
    )
    header = (
        f"{'app':<16}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'non-200':>8}"
        f"{'ratio':>7}{'min..max':>12}{'server CPU/req':>16}{'CPU ratio':>10}  verifies"
    )
    print(header)
    print("-" * len(header))
    worst = math.inf
    for plain, gated in PAIRS:
        base_cpu = cpu_us_per_request(results[plain])
        for variant in (plain, gated):
            rps, p50, p99, bad = summary(variant)
            cpu = cpu_us_per_request(results[variant])
            if variant == gated:
                ratio = statistics.median(ratios[gated])
                spread = f"{min(ratios[gated]):.2f}..{max(ratios[gated]):.2f}"
                calls = str(verify_calls[variant])
                cpu_ratio = f"{base_cpu / cpu:.3f}" if cpu and base_cpu else "n/a"
                worst = min(worst, ratio)
            else:
                ratio, spread, calls, cpu_ratio = 1.0, "", "-", "1.000"
            cpu_text = f"{cpu:.0f} us" if cpu is not None else "n/a"
            print(
                f"{variant:<16}{rps:>8.0f}{p50 * 1000:>8.2f}{p99 * 1000:>8.2f}{bad:>8}"
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
    verdict = "meets" if worst >= TARGET else "MISSES"
    print(f"worst median ratio {worst:.3f}: {verdict} the {TARGET} target")
    if any(summary(v)[3] for v in VARIANTS) or any(n != 1 for n in verify_calls.values()):
        raise SystemExit("unexpected non-200 answers or verify calls: see the table")


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
    args: argparse.Namespace, ports: dict[str, int], pids: dict[str, int], request: bytes
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[float]]]:
    """Each variant's runs, and each gated variant's per-round ratio to its plain twin:
    the two take turns going first, so drift on a shared machine falls on both alike."""
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {gated: [] for _, gated in PAIRS}
    for plain, gated in PAIRS:
        for round_ in range(args.rounds):
            order = (plain, gated) if round_ % 2 == 0 else (gated, plain)
            done = {}
            for v in order:
                cpu = process_cpu_seconds(pids[v])
                done[v] = load(ports[v], request, args.connections, args.seconds)
                after = process_cpu_seconds(pids[v])
                done[v]["cpu"] = None if cpu is None or after is None else after - cpu
            for variant, run in done.items():
                results[variant].append(run)
            ratios[gated].append(_rps([done[gated]]) / _rps([done[plain]]))
    return results, ratios


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()

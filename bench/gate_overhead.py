"""What ``svc_asgi.PaymentGate`` costs a request with a known receipt: requests/s as a ratio
to the same app *setting the gate's two response headers itself* (``X-Svc-Receipt``,
``Cache-Control: private``), with ``wrk``; and the gate's own instructions per request over
that app, with callgrind; under uvicorn's h11 and httptools protocols both.

Run: ``python bench/gate_overhead.py`` (about 6 minutes with the defaults; ``--quick``
about 2; needs the ``[server]`` and ``[dev]`` extras, ``wrk`` and ``valgrind``:
``apt-get install wrk valgrind``).

The baseline answers what the gate lets through, byte for byte, so the ratio isolates the
gate's own work (finding the credential, the memo of paid decisions, the ``send`` that
adds the headers) from what any app pays to write two more headers.

The bench starts a reference server (``python -m reference_server run``, a fresh SQLite
file) and, over the SDK, sets up a seller selling ``GET /v1/report`` at 0.01 and an agent
who pays it once: that receipt is sent with every request.  Then it starts one uvicorn
server per app and protocol (``--http``), each its own process on loopback (this script
with ``--serve``):

- ``starlette``: a Starlette app whose ``GET /v1/report`` answers a small JSON document
  with the two headers;
- ``starlette+gate``: the same app without them, wrapped in
  ``PaymentGate(prices={"GET /v1/report": …})``;
- ``bare`` and ``bare+gate``: the same with a bare ASGI callable instead of Starlette,
  the harshest comparison (the app itself costs next to nothing).

**Throughput (wrk).**  A load client written in Python spends as much CPU per request as
the server it loads, on the same cores, so its own noise swamps a difference of a few
percent; wrk's per-request cost is a small fraction of uvicorn's.  Each server is warmed
up (the gated server's first request verifies the receipt with the service; later ones
are decided from the gate's memory), then loaded by ``wrk -t THREADS -c CONNECTIONS``
(keep-alive HTTP/1.1, closed loops).  Each pair is measured in ``--rounds`` rounds of
``--seconds`` per variant, alternating which goes first (A B, B A, ...); each round gives
one gated/plain ratio and the table shows the median, so that the drift and bursts of a
shared machine, which move whole seconds up and down, cancel instead of landing on one
variant.  Both variants receive byte-identical requests and answer byte-identical
headers.  After the run each gated server reports how often it asked the service
(``POST /access/verify``): once, so the measured requests were all decided from memory.
With ``--pin`` (Linux, two CPUs or more) the app servers are pinned to CPU 1 and wrk to
CPU 0.  The server's CPU time per request (from ``/proc``) is shown beside each rate.

**Instructions (callgrind).**  A shared machine moves wall-clock figures by several
percent; instruction counts do not move.  Each app is served in process by uvicorn's own
protocol class (``--http``'s h11 or httptools, fed the same request bytes through a
transport that keeps what it is written), ``--calls`` requests on one keep-alive
connection after a warm-up, under ``valgrind --tool=callgrind`` collecting only inside
the measured loop (it runs as a ``ctypes`` callback, so ``--toggle-collect=ffi_call``
brackets it).  Instructions per request = collected / calls; the gate's own cost is the
gated app's minus its baseline's, the server's parsing and writing included in both.

``--json PATH`` writes the rows (bench JSON protocol): per app kind and protocol, the
throughput ratio (target >= 0.97) and the gate's own instructions per request (target
<= 20,000).  The script exits non-zero if any request failed (a non-2xx answer or a
socket error) or a gated server asked the service more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import math
import os
import platform
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    bench_parser,
    process_cpu_seconds,
    reference_server,
    require_tools,
    script_server,
    sqlite_database,
)
from _report import row

import svc

PRICE = "0.01"
VARIANTS = ("starlette", "starlette+gate", "bare", "bare+gate")
PAIRS = (("starlette", "starlette+gate"), ("bare", "bare+gate"))
#: uvicorn's two HTTP/1.1 protocols (``uvicorn --http``).
SERVERS = ("h11", "httptools")
TARGET = 0.97
#: The gate's own instructions per request over its baseline.
INSTRUCTIONS_TARGET = 20_000
#: The issue's names of the two app kinds.
KINDS = {"bare": "bare ASGI", "starlette": "Starlette"}
#: Long enough that the whole run is served from the cache (the default, 60 s, would
#: add one verify call per minute: nothing measurable, but not what is measured here).
CACHE_TTL = 3600.0
_BODY = json.dumps({"report": "all systems nominal", "rows": list(range(20))}).encode()
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


# --- the apps (run in the --serve and --count processes) ---------------------------------


class CountingTransport(httpx.AsyncBaseTransport):
    """The gate's own connection to the service, counting what it asks."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls[f"{request.method} {request.url.path}"] += 1
        return await self.inner.handle_async_request(request)


def build_app(variant: str) -> Any:
    """The variant's app; the plain ones answer the gate's two headers themselves."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from svc_asgi import PaymentGate

    counting = CountingTransport()
    gated = variant.endswith("+gate")
    paid_headers = (
        []
        if gated
        else [
            (b"x-svc-receipt", os.environ["BENCH_RECEIPT_ID"].encode()),
            (b"cache-control", b"private"),
        ]
    )

    if variant.startswith("starlette"):
        as_text = {k.decode(): v.decode() for k, v in paid_headers}

        async def report(request: Request) -> Response:
            return Response(_BODY, media_type="application/json", headers=as_text)

        async def stats(request: Request) -> Response:
            return JSONResponse(dict(counting.calls))

        app: Any = Starlette(routes=[Route("/v1/report", report), Route("/_stats", stats)])
    else:
        report_headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_BODY)).encode()),
            *paid_headers,
        ]

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            if scope["path"] == "/_stats":
                body = json.dumps(dict(counting.calls)).encode()
                headers = [(b"content-type", b"application/json")]
            else:
                body, headers = _BODY, report_headers
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    if gated:
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


def serve(variant: str, port: int, http: str, pinned: bool) -> None:
    import uvicorn

    if pinned and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})  # Linux, two CPUs or more; a no-op elsewhere

    uvicorn.run(
        build_app(variant),
        host="127.0.0.1",
        port=port,
        http=http,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


# --- instructions per request (run under callgrind with --count) ---------------------------


class _Transport(asyncio.Transport):
    """What uvicorn's protocol writes to, kept; a connection that never closes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        peers = {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}
        return peers.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def request_bytes(receipt_id: str) -> bytes:
    """The one request every variant and both load paths send."""
    return (
        "GET /v1/report HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\n"
        f"Accept: application/json\r\nX-Svc-Receipt: {receipt_id}\r\n\r\n"
    ).encode()


def count(variant: str, http: str, calls: int, warm_up: int = 50) -> None:
    """Serve ``calls`` requests through uvicorn's ``http`` protocol in process, the
    measured loop inside a ``ctypes`` callback (``ffi_call``, which callgrind brackets)."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    loop = asyncio.new_event_loop()
    config = Config(
        app=build_app(variant), http=http, log_level="warning", access_log=False, lifespan="off"
    )
    config.load()
    state = ServerState()
    protocol = config.http_protocol_class(
        config=config, server_state=state, app_state={}, _loop=loop
    )
    transport = _Transport()
    protocol.connection_made(transport)
    request = request_bytes(os.environ["BENCH_RECEIPT_ID"])

    async def requests(n: int) -> None:
        for _ in range(n):
            protocol.data_received(request)
            await asyncio.gather(*state.tasks)  # the request's answer, written

    loop.run_until_complete(requests(warm_up))  # the gated app verifies once, over the network
    measured = ctypes.CFUNCTYPE(None)(lambda: loop.run_until_complete(requests(calls)))
    measured()
    answers = bytes(transport.written).split(b"HTTP/1.1 ")[1:]
    expected = f"x-svc-receipt: {os.environ['BENCH_RECEIPT_ID']}".encode()
    good = [a for a in answers if a.startswith(b"200 ") and expected in a.lower()]
    if len(good) != warm_up + calls or len(answers) != len(good):
        raise SystemExit(f"{variant} ({http}): {len(good)} good answers of {len(answers)}")


def instructions_per_request(
    variant: str, http: str, calls: int, env: dict[str, str], log: Path
) -> float:
    """``count`` under callgrind, collecting in the measured loop only."""
    out = log.with_suffix(".callgrind")
    command = [
        "valgrind",
        "--tool=callgrind",
        "--collect-atstart=no",
        "--toggle-collect=ffi_call",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--count",
        variant,
        "--http",
        http,
        "--calls",
        str(calls),
    ]
    done = subprocess.run(
        command, env={**env, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=False
    )
    log.write_text(done.stdout + done.stderr)
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind failed ({done.returncode}), see {log}:\n{done.stderr[-2000:]}")
    return int(found[-1]) / calls


# --- processes ------------------------------------------------------------------------------


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


def parse_wrk(output: str, cpu_seconds: float | None) -> WrkRun:
    """The run wrk's report (with ``--latency``) tells of, the server having spent
    ``cpu_seconds``; stops the bench if the report is not wrk's."""
    done = _DONE.search(output)
    rps = _RPS.search(output)
    if done is None or rps is None:
        raise SystemExit(f"wrk's output was not understood:\n{output}")
    latencies = {q: float(v) * _UNIT_MS[u] for q, v, u in _LATENCY_LINE.findall(output)}
    errors = sum(int(n) for n in _NON_2XX.findall(output))
    errors += sum(sum(int(n) for n in m) for m in _SOCKET_ERRORS.findall(output))
    return WrkRun(
        requests=int(done.group(1)),
        seconds=float(done.group(2)) * _UNIT_MS[done.group(3)] / 1000,
        rps=float(rps.group(1)),
        p50_ms=latencies.get("50", math.nan),
        p99_ms=latencies.get("99", math.nan),
        errors=errors,
        cpu_seconds=cpu_seconds,
    )


def wrk(url: str, pid: int, receipt_id: str, seconds: int, args: argparse.Namespace) -> WrkRun:
    """Load ``GET /v1/report`` at ``url`` with wrk's keep-alive connections (``args``'
    threads and connections; on CPU 0 with ``--pin``), every request bearing the receipt
    (gated and plain servers get the same bytes)."""
    command = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{seconds}s",
        "--latency",
        "-H",
        "Accept: application/json",
        "-H",
        f"X-Svc-Receipt: {receipt_id}",
        f"{url}/v1/report",
    ]
    if args.pin:
        command = ["taskset", "-c", "0", *command]
    before = process_cpu_seconds(pid)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    after = process_cpu_seconds(pid)
    if done.returncode != 0:
        raise SystemExit(f"wrk failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return parse_wrk(done.stdout, None if before is None or after is None else after - before)


def cpu_us_per_request(runs: list[WrkRun]) -> float | None:
    """The server's CPU time per answered request over ``runs`` (``None``: not on Linux)."""
    if any(r.cpu_seconds is None for r in runs):
        return None
    done = sum(r.requests for r in runs)
    return sum(r.cpu_seconds or 0.0 for r in runs) / done * 1e6 if done else None


def _rps(runs: list[WrkRun]) -> float:
    return sum(r.requests for r in runs) / sum(r.seconds for r in runs)


# --- main -----------------------------------------------------------------------------------

#: A server: (protocol, variant).
Server = tuple[str, str]


def main() -> None:
    parser = bench_parser(__doc__, "a short run (smoke test)")
    parser.add_argument("--seconds", type=int, default=2, help="per variant and round (wrk -d)")
    parser.add_argument("--connections", type=int, default=16, help="wrk -c")
    parser.add_argument("--threads", type=int, default=1, help="wrk -t")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--pin", action="store_true", help="servers on CPU 1, wrk on CPU 0")
    parser.add_argument("--calls", type=int, default=300, help="requests counted by callgrind")
    parser.add_argument("--http", nargs="+", choices=SERVERS, default=list(SERVERS))
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--count", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.http[0], args.pin)
        return
    if args.count:
        count(args.count, args.http[0], args.calls)
        return
    if args.quick:
        args.seconds, args.rounds, args.calls = 1, 4, min(args.calls, 100)
    measure(args)


def measure(args: argparse.Namespace) -> None:
    """The whole bench: the service, the servers, wrk's rounds, callgrind's counts."""
    require_tools("wrk", "valgrind")
    with (
        tempfile.TemporaryDirectory() as tmp,
        sqlite_database() as database_url,
        ExitStack() as stack,
    ):
        tmpdir = Path(tmp)
        service, _ = stack.enter_context(reference_server(database_url, tmpdir / "service.log"))
        seller_key, resource_id, receipt_id = set_up(service)
        env = {
            **os.environ,
            "SVC_BASE_URL": service,
            "SVC_SELLER_KEY": seller_key,
            "BENCH_RESOURCE_ID": resource_id,
            "BENCH_RECEIPT_ID": receipt_id,
        }
        servers = [(http, v) for http in args.http for v in VARIANTS]
        urls, pids = _start_servers(stack, env, tmpdir, servers, pinned=args.pin)

        def load(server: Server, seconds: int) -> WrkRun:
            return wrk(urls[server], pids[server], receipt_id, seconds, args)

        for server in servers:  # warm up: the gate verifies once and remembers
            if args.quick:
                httpx.get(
                    f"{urls[server]}/v1/report", headers={"X-Svc-Receipt": receipt_id}
                ).raise_for_status()
            else:
                load(server, 1)

        results, ratios = _alternating_rounds(args.http, args.rounds, args.seconds, load)
        verify_calls = {
            s: httpx.get(f"{urls[s]}/_stats").json().get("POST /access/verify", 0)
            for s in servers
            if s[1].endswith("+gate")
        }
        print(f"\ncallgrind: {args.calls} requests per app and protocol ...", flush=True)
        instructions = {
            s: instructions_per_request(
                s[1], s[0], args.calls, env, tmpdir / f"{s[0]}-{s[1]}-callgrind.log"
            )
            for s in servers
        }

    rows = _report(args, results, ratios, instructions, verify_calls)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    errors = sum(r.errors for runs in results.values() for r in runs)
    if errors or any(n != 1 for n in verify_calls.values()):
        raise SystemExit(
            f"{errors} failed request(s) or unexpected verify calls {verify_calls}: see the table"
        )


def _report(
    args: argparse.Namespace,
    results: dict[Server, list[WrkRun]],
    ratios: dict[Server, list[float]],
    instructions: dict[Server, float],
    verify_calls: dict[Server, int],
) -> list[dict[str, Any]]:
    """Print the tables; the JSON rows (per app kind and protocol: ratio, instructions)."""
    print(
        f"\nsvc_asgi.PaymentGate overhead, known receipt: wrk {args.threads} thread(s), "
        f"{args.connections} keep-alive connections, {args.rounds} alternating rounds of "
        f"{args.seconds} s per variant{', pinned' if args.pin else ''}; uvicorn "
        f"{version('uvicorn')} (one process each), Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; baseline: the same app answering the gate's two headers\n"
    )
    header = (
        f"{'http':<10}{'app':<16}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>8}"
        f"{'ratio':>7}{'min..max':>12}{'CPU/req':>9}{'instr/req':>11}{'gate adds':>11}"
        "  verifies"
    )
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for http in args.http:
        for plain, gated in PAIRS:
            base = (http, plain)
            for variant in (plain, gated):
                server = (http, variant)
                runs = results[server]
                cpu = cpu_us_per_request(runs)
                p50 = statistics.median(r.p50_ms for r in runs)
                p99 = statistics.median(r.p99_ms for r in runs)
                errors = sum(r.errors for r in runs)
                instr = instructions[server]
                if variant == gated:
                    ratio = statistics.median(ratios[server])
                    spread = f"{min(ratios[server]):.2f}..{max(ratios[server]):.2f}"
                    added = instr - instructions[base]
                    calls, adds = str(verify_calls[server]), f"{added:,.0f}"
                    rows += _rows(args, http, plain, runs, results[base], ratio, instr, added)
                else:
                    ratio, spread, calls, adds = 1.0, "", "-", ""
                cpu_text = f"{cpu:.0f} us" if cpu is not None else "n/a"
                print(
                    f"{http:<10}{variant:<16}{_rps(runs):>8.0f}{p50:>8.2f}{p99:>8.2f}"
                    f"{errors:>8}{ratio:>7.3f}{spread:>12}{cpu_text:>9}{instr:>11,.0f}"
                    f"{adds:>11}  {calls}"
                )
    print(
        "\nratio: median over the rounds of gated req/s / plain req/s in the same round;"
        f"\ninstr/req: callgrind, {args.calls} requests through uvicorn's protocol in process"
        "\n(the server's parsing and writing included); gate adds: gated - plain"
    )
    missed = [r["measure"] + f" ({r['setting']})" for r in rows if not r["met"]]
    print("\nevery target met" if not missed else "\nMISSED: " + "; ".join(missed))
    return rows


def _rows(
    args: argparse.Namespace,
    http: str,
    kind: str,
    gated: list[WrkRun],
    plain: list[WrkRun],
    ratio: float,
    instructions: float,
    added: float,
) -> list[dict[str, Any]]:
    """The two rows of one app kind under one protocol."""
    baseline_name = f"same {KINDS[kind]} app setting the headers"
    return [
        row(
            f"gate with known receipt, {KINDS[kind]}",
            setting=f"wrk -t{args.threads} -c{args.connections}, uvicorn --http {http}",
            value=round(_rps(gated), 1),
            unit="req/s",
            baseline_name=baseline_name,
            baseline=round(_rps(plain), 1),
            ratio=round(ratio, 3),
            target=f">= {TARGET}",
            met=ratio >= TARGET,
        ),
        row(
            f"gate's own cost, {KINDS[kind]}",
            setting=f"callgrind, uvicorn --http {http} in process",
            value=round(added),
            unit="instructions/req",
            baseline_name=f"{baseline_name}: all",
            baseline=round(instructions - added),
            ratio=round(instructions / (instructions - added), 3),
            target=f"<= {INSTRUCTIONS_TARGET}",
            met=added <= INSTRUCTIONS_TARGET,
        ),
    ]


def _start_servers(
    stack: ExitStack, env: dict[str, str], tmpdir: Path, servers: list[Server], *, pinned: bool
) -> tuple[dict[Server, str], dict[Server, int]]:
    """One uvicorn process per server (stopped with ``stack``): their URLs and pids."""
    urls: dict[Server, str] = {}
    pids: dict[Server, int] = {}
    for server in servers:
        http, variant = server
        command = [__file__, "--serve", variant, "--http", http, *(["--pin"] if pinned else [])]
        log = tmpdir / f"{http}-{variant}.log"
        urls[server], process = stack.enter_context(script_server(command, "/_stats", log, env))
        pids[server] = process.pid
    return urls, pids


def _alternating_rounds(
    protocols: list[str], rounds: int, seconds: int, load: Callable[[Server, int], WrkRun]
) -> tuple[dict[Server, list[WrkRun]], dict[Server, list[float]]]:
    """Each server's runs, and each gated server's per-round ratio to its plain twin:
    the two take turns going first, so drift on a shared machine falls on both alike."""
    results: dict[Server, list[WrkRun]] = {}
    ratios: dict[Server, list[float]] = {}
    for http in protocols:
        for plain, gated in PAIRS:
            a, b = (http, plain), (http, gated)
            for round_ in range(rounds):
                order = (a, b) if round_ % 2 == 0 else (b, a)
                done = {s: load(s, seconds) for s in order}
                for server, run in done.items():
                    results.setdefault(server, []).append(run)
                ratios.setdefault(b, []).append(done[b].rps / done[a].rps)
    return results, ratios


if __name__ == "__main__":
    main()

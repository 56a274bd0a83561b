"""A live gate's paid request settling through the official x402 facilitator on the
devchain, as a ratio to x402's own ``PaymentMiddlewareASGI`` settling through the same
facilitator, in the same run.

Run: ``python bench/live_settle.py`` (about a minute with the defaults; needs the
``[dev]`` extras and anvil, ``npm install @foundry-rs/anvil`` as the README says; for
PostgreSQL a server at ``--postgres-url``).

It starts ``python -m reference_server devchain`` (anvil, the token, the official x402
facilitator over HTTP) and, per database, ``python -m reference_server run`` configured
with the devchain's ``SVC_LIVE_*`` export lines.  Over plain HTTP it makes a live seller
with payments enabled (``processor_deposit``) selling ``GET /report`` for 0.01, and
three sellers, each this script in a subprocess:

- ``hosted``: the live resource's ``gate_url``, in front of a plain upstream;
- ``svc_asgi``: the same app behind ``svc_asgi.PaymentGate`` with the live seller key;
- ``x402``: the same app behind x402's ``PaymentMiddlewareASGI`` (the baseline), its
  facilitator the devchain's.

x402's ``x402HttpxClient`` (the devchain's token allowed) pays each ``--requests`` times,
one at a time, in halves run A B C C B A: the 402, the signature, the paid retry, whose
verify and settle go through the same facilitator onto the same anvil.  The ratio is
what the service adds (the credential claimed in the database, the hold, the booking) to
the settlement itself.  Everything shares this machine's cores: read the ratios.

``--json PATH`` writes the figures as rows of the bench JSON protocol (bench/README.md):
each gate's p50 over the middleware's, per database, against ``<= 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from _harness import (
    Sample,
    bench_parser,
    chosen_databases,
    closed_loop,
    free_port,
    fresh_database,
    new_seller,
    post_json,
    print_comparison,
    progress,
    reference_server,
    report_app,
    report_failures,
    script_server,
    stop_process,
    versions_line,
    x402_seller,
)
from _report import time_ratio_row

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("hosted", "svc_asgi", "x402")
GATES = ("hosted", "svc_asgi")
TARGET = 2.0
PRICE = "0.01"
QUICK_REQUESTS = 10


# --- the devchain ---------------------------------------------------------------------------


@contextmanager
def devchain() -> Iterator[dict[str, str]]:
    """``svc-server devchain`` in a subprocess; yields its export lines as a dict."""
    from reference_server.devchain.run import READY_LINE

    process = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "devchain", "--port", str(free_port())],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    exports: dict[str, str] = {}
    try:
        while (line := lines.get(timeout=60)) != READY_LINE:
            if line is None:
                raise SystemExit(f"devchain exited ({process.wait()}): is anvil installed?")
            _, assignment = shlex.split(line)
            name, _, value = assignment.partition("=")
            exports[name] = value
        yield exports
    finally:
        stop_process(process)  # type: ignore[arg-type]


# --- the sellers (run with --serve) ---------------------------------------------------------


def serve(kind: str, port: int, config: dict[str, str]) -> None:
    """One seller app: ``upstream`` (plain), ``svc_asgi`` or ``x402``."""
    import uvicorn

    if kind == "x402":
        price = {
            "amount": str(int(float(PRICE) * 1_000_000)),
            "asset": config["asset"],
            "extra": {"name": config["asset_name"], "version": config["asset_version"]},
        }
        app = x402_seller(config["facilitator"], config["network"], price, config["pay_to"])
    else:
        app = report_app()
    if kind == "svc_asgi":
        from svc_asgi import PaymentGate

        app = PaymentGate(
            app,
            prices={"/report": config["resource_id"]},
            service_url=config["service_url"],
            seller_key=config["seller_key"],
        )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextmanager
def seller(kind: str, config: dict[str, str], logs: Path) -> Iterator[str]:
    command = [__file__, "--serve", kind, json.dumps(config)]
    with script_server(command, "/report", logs / f"{kind}.log") as (url, _):
        yield url + "/report"


# --- set-up over plain HTTP -----------------------------------------------------------------


def live_seller(url: str, upstream: str) -> dict[str, str]:
    """A live seller with payments enabled and one resource: its key, the resource."""
    with httpx.Client(base_url=url, timeout=30) as http:
        made = new_seller(http, "live")
        key = f"Bearer {made['seller_key']}"
        resource = post_json(
            http,
            "/resources",
            {"kind": "http", "path": "/report", "amount": PRICE, "upstream_url": upstream},
            Authorization=key,
        )
        r = http.patch("/sellers/me/payments", json={}, headers={"Authorization": key})
        if r.status_code >= 300:
            raise SystemExit(f"set-up failed: enable payments -> {r.status_code} {r.text}")
    return {
        "seller_key": str(made["seller_key"]),
        "resource_id": str(resource["id"]),
        "gate_url": str(resource["gate_url"]),
    }


# --- the load -------------------------------------------------------------------------------


async def measure(
    exports: dict[str, str], urls: dict[str, str], requests: int
) -> dict[str, Sample]:
    """Each path's sample, and the warm-up's (whose failures count too)."""
    from eth_account import Account
    from x402 import x402Client
    from x402.http.clients import x402HttpxClient
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    network = f"eip155:{exports['SVC_LIVE_CHAIN_ID']}"
    x402 = x402Client()
    register_exact_evm_client(
        x402, EthAccountSigner(Account.from_key(exports["DEVCHAIN_PAYER_1_KEY"]))
    )
    x402.set_spend_controls(
        {"allowed_assets": [{"network": network, "asset": exports["SVC_LIVE_ASSET_ADDRESS"]}]}
    )
    samples = {path: Sample() for path in (*PATHS, "warm-up")}
    async with x402HttpxClient(x402, timeout=60) as http:
        calls = {path: [functools.partial(http.get, urls[path])] for path in PATHS}
        for path in PATHS:  # warm-up: connections, imports, first-use caches
            await closed_loop(calls[path], 2, samples["warm-up"])
        for path in (*PATHS, *reversed(PATHS)):
            await closed_loop(calls[path], requests // 2, samples[path])
    return samples


def run_database(
    name: str, database_url: str, exports: dict[str, str], requests: int
) -> dict[str, Sample]:
    live_env = {k: v for k, v in exports.items() if k.startswith("SVC_LIVE_")}
    with tempfile.TemporaryDirectory(prefix="svc-bench-log-") as tmp:
        logs = Path(tmp)
        with (
            reference_server(database_url, logs / "server.log", **live_env) as (url, _),
            seller("upstream", {}, logs) as upstream,
        ):
            shop = live_seller(url, upstream)
            gate = {**shop, "service_url": url}
            baseline = {
                "facilitator": exports["SVC_LIVE_FACILITATOR_URL"],
                "network": f"eip155:{exports['SVC_LIVE_CHAIN_ID']}",
                "asset": exports["SVC_LIVE_ASSET_ADDRESS"],
                "asset_name": exports["SVC_LIVE_ASSET_NAME"],
                "asset_version": exports["SVC_LIVE_ASSET_VERSION"],
                "pay_to": exports["SVC_LIVE_DEPOSIT_ADDRESS"],
            }
            with seller("svc_asgi", gate, logs) as asgi, seller("x402", baseline, logs) as x402:
                urls = {"hosted": shop["gate_url"], "svc_asgi": asgi, "x402": x402}
                progress(f"{name}: {requests} paid requests per path...")
                return asyncio.run(measure(exports, urls, requests))


# --- report ---------------------------------------------------------------------------------


def print_table(results: dict[str, dict[str, Sample]], header: list[str]) -> None:
    lines = [
        (name, gate, paths[gate], paths["x402"])
        for name, paths in results.items()
        for gate in GATES
    ]
    print_comparison(header, ("gate", "<9"), ("live gate", "x402 middleware"), lines)
    print("ratio = the live gate's latency / x402's middleware's (above 1: the gate is slower).")


def json_rows(results: dict[str, dict[str, Sample]]) -> list[dict[str, Any]]:
    return [
        time_ratio_row(
            "live gate settle p50 vs x402 middleware",
            paths[gate].percentile(0.5) * 1e3,
            paths["x402"].percentile(0.5) * 1e3,
            database=name,
            setting=f"{gate} gate, devchain",
            unit="ms",
            baseline_name="x402 PaymentMiddlewareASGI",
            target=TARGET,
        )
        for name, paths in results.items()
        for gate in GATES
    ]


def main() -> None:
    parser = bench_parser(
        __doc__, f"a short run: {QUICK_REQUESTS} requests per path", "sqlite,postgresql"
    )
    parser.add_argument("--requests", type=int, default=60, help="paid requests per path")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve[0], args.port, json.loads(args.serve[1]))
        return
    if args.quick:
        args.requests = QUICK_REQUESTS
    databases = chosen_databases(parser, args)
    header = [
        "A live gate's paid request, settled through the official x402 facilitator on anvil,",
        "vs x402's PaymentMiddlewareASGI settling through the same facilitator (same run).",
        versions_line(databases, args.postgres_url)
        + f"; {args.requests} paid requests per path, one at a time (A B C C B A), at {PRICE}.",
        f"Client, server, sellers, anvil and facilitator share {os.cpu_count() or 0} cores.",
    ]
    results: dict[str, dict[str, Sample]] = {}
    with devchain() as exports:
        for name in databases:
            with fresh_database(name, args.postgres_url) as database_url:
                results[name] = run_database(name, database_url, exports, args.requests)
    print_table(results, header)
    if args.json is not None:
        args.json.write_text(json.dumps(json_rows(results), indent=2) + "\n")
    failures = [
        f"{name}, {path}: {example}"
        for name, paths in results.items()
        for path, sample in paths.items()
        for example in sample.error_examples
    ]
    report_failures(failures, len(failures))


if __name__ == "__main__":
    main()

"""``POST /spend/pay-url`` end-to-end latency, as a ratio to the official x402 client
paying the same x402-gated endpoint directly, measured in the same run.

Run: ``python bench/pay_url.py`` (about a minute with the defaults; needs the ``[server]``
and ``[rails]`` extras and, for PostgreSQL, a server at ``--postgres-url``).

For each database the bench starts ``python -m reference_server run`` in a subprocess (a
fresh SQLite file, or a fresh PostgreSQL schema it creates and drops) and a seller: this
script with ``--serve-seller``, a Starlette app behind x402's own
``PaymentMiddlewareASGI`` selling ``GET /report`` for 0.001 USDC on ``eip155:84532``, whose
facilitator is the reference server's sandbox (``/sandbox/x402``).  Over plain HTTP it
mints a funded test wallet key, and funds a fresh payer account on the sandbox chain with
the faucet.  Then, at 1 and 8 concurrent clients, closed loops send ``--requests`` paid
requests per path, split in two halves run in A B B A order:

- ``pay-url``: ``POST /spend/pay-url {"url": <seller>/report}`` with the wallet key: the
  service probes the URL, signs with its hot wallet (x402's client), reserves in the
  ledger and mints the sandbox float, sends the paid request, asks the sandbox chain,
  posts the reservation and writes the receipt;
- ``x402``: x402's ``x402HttpxClient`` with the payer's key ``GET``-ing the same URL:
  the 402, the signature, the paid retry.

Both paths make the same two requests to the seller, whose verify and settle go through
the same facilitator; the ratio is what the service's own work (authentication, the
attempt record, the policy check and reservation, the chain verdict) adds to a direct
payment.  Client, server, seller and database share the machine: read the ratios.

``--json PATH`` also writes the issue's figures as rows of the bench JSON protocol
(bench/README.md): the pay-url p50 over the x402 client's, per database and client count,
against the targets (``<= 1.25`` at 1 client, ``<= 1.5`` at 8).  ``--quick`` is a short
run (a smoke test, under half a minute per database).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    add_database_options,
    chosen_databases,
    free_port,
    fresh_database,
    ms,
    percentile,
    post_json,
    print_heading,
    ratio,
    reference_server,
    report_failures,
    serving,
    versions_line,
)
from _report import time_ratio_row

CONCURRENCY = (1, 8)
#: The issue's target for the pay-url p50 over the x402 client's, per client count.
TARGETS = {1: 1.25, 8: 1.5}
QUICK_REQUESTS = 20
PRICE = "$0.001"
PATHS = ("pay-url", "x402")
MAX_ERRORS_SHOWN = 5


@attrs.define
class Sample:
    """One path in one cell: latencies of the paid requests, and failures."""

    latencies: list[float] = attrs.Factory(list)
    errors: int = 0
    error_examples: list[str] = attrs.Factory(list)

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile, in seconds."""
        return percentile(self.latencies, q)


# --- the seller (run with --serve-seller) --------------------------------------------------


def serve_seller(port: int, facilitator: str, pay_to: str) -> None:
    """x402's documented Base Sepolia set-up, pointed at the sandbox facilitator."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from x402 import x402ResourceServer
    from x402.http import FacilitatorConfig, HTTPFacilitatorClient
    from x402.http.middleware.fastapi import PaymentMiddlewareASGI
    from x402.mechanisms.evm.exact import register_exact_evm_server

    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator)))
    register_exact_evm_server(server, "eip155:84532")

    async def report(request: Request) -> JSONResponse:
        return JSONResponse({"report": "the goods", "rows": list(range(20))})

    app = Starlette(routes=[Route("/report", report)])
    accepts = {"scheme": "exact", "payTo": pay_to, "price": PRICE, "network": "eip155:84532"}
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# --- processes ------------------------------------------------------------------------------


@contextmanager
def stack(database_url: str, logs: Path, servers: int = 1) -> Iterator[tuple[list[str], str]]:
    """``servers`` reference server processes on the one database (started one after the
    other, so one migrates) and the seller; yields (server URLs, seller's paid URL).  The
    seller's facilitator is the first server's sandbox."""
    with ExitStack() as processes:
        urls = [
            processes.enter_context(reference_server(database_url, logs / f"server{i}.log"))[0]
            for i in range(servers)
        ]
        url = urls[0]
        seller_port = free_port()
        seller = [
            sys.executable,
            __file__,
            "--serve-seller",
            str(seller_port),
            "--facilitator",
            url + "/sandbox/x402",
            "--pay-to",
            "0x" + secrets.token_hex(20),
        ]
        seller_url = f"http://127.0.0.1:{seller_port}/report"
        with serving(seller, dict(os.environ), seller_url, logs / "seller.log", any_status=True):
            yield urls, seller_url


# --- set-up over plain HTTP -----------------------------------------------------------------


def set_up(url: str) -> tuple[str, Any]:
    """A funded test wallet key, and a payer account funded on the sandbox chain."""
    from eth_account import Account

    payer = Account.create()
    test = {"X-Svc-Environment": "test"}
    with httpx.Client(base_url=url, timeout=30) as http:
        post = functools.partial(post_json, http)

        owner = post("/owners", {"email": f"b{secrets.token_hex(6)}@example.com"})
        auth = f"Bearer {owner['owner_jwt']}"
        key = post("/wallet-keys", {"name": "bench agent"}, Authorization=auth, **test)
        post(f"/wallet-keys/{key['id']}/fund", {"amount": "10000"}, Authorization=auth, **test)
        post("/sandbox/faucet", {"address": payer.address, "amount": "1000"})
    return str(key["key"]), payer


# --- the load -------------------------------------------------------------------------------

Pay = Callable[[], Awaitable[httpx.Response]]


async def closed_loop(pays: list[Pay], requests: int, sample: Sample) -> None:
    """``requests`` paid requests shared by the clients, each sending its next as soon as
    the last is answered."""
    left = requests

    async def client_loop(pay: Pay) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            began = time.perf_counter()
            try:
                r = await pay()
                failure = None if r.status_code == 200 else f"{r.status_code} {r.text[:300]}"
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            if failure is None:
                sample.latencies.append(time.perf_counter() - began)
            else:
                sample.errors += 1
                if len(sample.error_examples) < MAX_ERRORS_SHOWN:
                    sample.error_examples.append(failure)

    await asyncio.gather(*(client_loop(pay) for pay in pays))


async def measure_cell(
    urls: list[str], seller_url: str, wallet_key: str, payer: Any, concurrency: int, requests: int
) -> dict[str, Sample]:
    from x402 import x402Client
    from x402.http.clients import x402HttpxClient
    from x402.mechanisms.evm.exact import register_exact_evm_client
    from x402.mechanisms.evm.signers import EthAccountSigner

    service = [
        httpx.AsyncClient(
            base_url=urls[i % len(urls)],  # the clients spread over the server processes
            timeout=60,
            headers={"Authorization": f"Bearer {wallet_key}"},
            limits=httpx.Limits(max_connections=1),
        )
        for i in range(concurrency)
    ]
    direct = []
    for _ in range(concurrency):
        x402 = x402Client()
        register_exact_evm_client(x402, EthAccountSigner(payer))
        direct.append(x402HttpxClient(x402, timeout=60, limits=httpx.Limits(max_connections=1)))

    def via_service(http: httpx.AsyncClient) -> Pay:
        body = {"url": seller_url}
        return lambda: http.post(
            "/spend/pay-url", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
        )

    def via_x402(http: httpx.AsyncClient) -> Pay:
        return lambda: http.get(seller_url)

    clients = {
        "pay-url": [via_service(h) for h in service],
        "x402": [via_x402(h) for h in direct],
    }
    samples = {path: Sample() for path in PATHS}
    try:
        for path in PATHS:  # warm-up: connections, imports, first-use caches
            await closed_loop(clients[path], concurrency * 2, Sample())
        for path in ("pay-url", "x402", "x402", "pay-url"):
            await closed_loop(clients[path], requests // 2, samples[path])
    finally:
        for http in [*service, *direct]:
            await http.aclose()
    return samples


def run_database(
    name: str, database_url: str, requests: int, servers: int = 1
) -> list[dict[str, Sample]]:
    with tempfile.TemporaryDirectory(prefix="svc-bench-log-") as logs:
        with stack(database_url, Path(logs), servers) as (urls, seller_url):
            wallet_key, payer = set_up(urls[0])
            cells = []
            for concurrency in CONCURRENCY:
                print(f"  {name}: {concurrency} client(s)...", file=sys.stderr, flush=True)
                cells.append(
                    asyncio.run(
                        measure_cell(urls, seller_url, wallet_key, payer, concurrency, requests)
                    )
                )
        return cells


# --- report ---------------------------------------------------------------------------------


def print_table(results: dict[str, list[dict[str, Sample]]], header: list[str]) -> None:
    columns = (
        f"{'database':<10} {'clients':>7} | {'p50 ms':>7} {'p95 ms':>7} | {'p50 ms':>7}"
        f" {'p95 ms':>7} | {'p50':>5} {'p95':>5} | {'errors':>6}"
    )
    above = f"{'':<10} {'':>7} | {'pay-url':<15} | {'x402 client':<15} | {'ratio':<11} |"
    print_heading(header, above, columns)
    for name, cells in results.items():
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True):
            via, direct = cell["pay-url"], cell["x402"]
            print(
                f"{name:<10} {concurrency:>7} | {ms(via.percentile(0.5)):>7}"
                f" {ms(via.percentile(0.95)):>7} | {ms(direct.percentile(0.5)):>7}"
                f" {ms(direct.percentile(0.95)):>7} |"
                f" {ratio(via.percentile(0.5), direct.percentile(0.5)):>5}"
                f" {ratio(via.percentile(0.95), direct.percentile(0.95)):>5}"
                f" | {via.errors + direct.errors:>6}"
            )
    print()
    print("ratio = pay-url latency / x402 client latency (above 1: pay-url is slower).")


def json_rows(
    results: dict[str, list[dict[str, Sample]]], servers: int = 1
) -> list[dict[str, Any]]:
    """The issue's figures, one row each (bench JSON protocol): p50 ratio per cell."""
    rows = []
    for name, cells in results.items():
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True):
            rows.append(
                time_ratio_row(
                    "pay-url p50 vs x402 client",
                    cell["pay-url"].percentile(0.5) * 1e3,
                    cell["x402"].percentile(0.5) * 1e3,
                    database=name,
                    setting=f"{concurrency} client"
                    + ("s" if concurrency > 1 else "")
                    + (f", {servers} server processes" if servers > 1 else ""),
                    unit="ms",
                    baseline_name="x402 httpx client, direct",
                    target=TARGETS[concurrency],
                )
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="paid requests per path and cell")
    add_database_options(parser)
    parser.add_argument("--json", type=Path, help="also write the figures here (bench JSON rows)")
    parser.add_argument(
        "--quick", action="store_true", help=f"a short run: {QUICK_REQUESTS} requests per cell"
    )
    parser.add_argument(
        "--servers", type=int, default=1, help="reference server processes sharing the database"
    )
    parser.add_argument("--serve-seller", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--facilitator", help=argparse.SUPPRESS)
    parser.add_argument("--pay-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_seller is not None:
        serve_seller(args.serve_seller, args.facilitator, args.pay_to)
        return
    if args.quick:
        args.requests = QUICK_REQUESTS
    databases = chosen_databases(parser, args)
    header = [
        "POST /spend/pay-url vs the official x402 httpx client paying the same endpoint",
        versions_line(databases, args.postgres_url)
        + f"; {args.requests} paid requests per path and cell (two halves, A B B A),",
        f"closed loops at {' / '.join(map(str, CONCURRENCY))} clients; a seller behind x402's "
        f"PaymentMiddlewareASGI at {PRICE[1:]} USDC,",
        "settling through the reference server's sandbox facilitator.  Client, server, seller",
        f"and database share this machine's {os.cpu_count() or 0} cores: read the ratios."
        + (f"  {args.servers} server processes share the database." if args.servers > 1 else ""),
    ]
    results: dict[str, list[dict[str, Sample]]] = {}
    for name in databases:
        with fresh_database(name, args.postgres_url) as database_url:
            results[name] = run_database(name, database_url, args.requests, args.servers)

    print_table(results, header)
    if args.json is not None:
        args.json.write_text(json.dumps(json_rows(results, args.servers), indent=2) + "\n")
    failures = [
        example
        for cells in results.values()
        for cell in cells
        for sample in cell.values()
        for example in sample.error_examples
    ]
    report_failures(failures, len(failures), MAX_ERRORS_SHOWN)


if __name__ == "__main__":
    main()

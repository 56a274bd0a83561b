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
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from _harness import (
    Sample,
    bench_parser,
    chosen_databases,
    closed_loop,
    fresh_database,
    funded_wallet_key,
    post_json,
    print_comparison,
    progress,
    reference_server,
    report_cell_failures,
    script_server,
    versions_line,
    x402_seller,
)
from _report import time_ratio_row

CONCURRENCY = (1, 8)
#: The issue's target for the pay-url p50 over the x402 client's, per client count.
TARGETS = {1: 1.25, 8: 1.5}
QUICK_REQUESTS = 20
PRICE = "$0.001"
PATHS = ("pay-url", "x402")


# --- the seller (run with --serve-seller) --------------------------------------------------


def serve_seller(port: int, facilitator: str, pay_to: str) -> None:
    """x402's documented Base Sepolia set-up, pointed at the sandbox facilitator."""
    import uvicorn

    app = x402_seller(facilitator, "eip155:84532", PRICE, pay_to)
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
        facilitator = urls[0] + "/sandbox/x402"
        seller = [__file__, "--serve-seller", "--facilitator", facilitator]
        seller += ["--pay-to", "0x" + secrets.token_hex(20)]
        with script_server(seller, "/report", logs / "seller.log") as (seller_url, _):
            yield urls, seller_url + "/report"


# --- set-up over plain HTTP -----------------------------------------------------------------


def set_up(url: str) -> tuple[str, Any]:
    """A funded test wallet key, and a payer account funded on the sandbox chain."""
    from eth_account import Account

    payer = Account.create()
    with httpx.Client(base_url=url, timeout=30) as http:
        key = funded_wallet_key(http, "10000")
        post_json(http, "/sandbox/faucet", {"address": payer.address, "amount": "1000"})
    return str(key["key"]), payer


# --- the load -------------------------------------------------------------------------------

Pay = Callable[[], Awaitable[httpx.Response]]


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

    clients: dict[str, list[Pay]] = {
        "pay-url": [via_service(h) for h in service],
        "x402": [functools.partial(h.get, seller_url) for h in direct],
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
                progress(f"{name}: {concurrency} client(s)...")
                cells.append(
                    asyncio.run(
                        measure_cell(urls, seller_url, wallet_key, payer, concurrency, requests)
                    )
                )
        return cells


# --- report ---------------------------------------------------------------------------------


def print_table(results: dict[str, list[dict[str, Sample]]], header: list[str]) -> None:
    lines = [
        (name, concurrency, cell["pay-url"], cell["x402"])
        for name, cells in results.items()
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True)
    ]
    print_comparison(header, ("clients", ">7"), ("pay-url", "x402 client"), lines, errors=True)
    print("ratio = pay-url latency / x402 client latency (above 1: pay-url is slower).")


def json_rows(
    results: dict[str, list[dict[str, Sample]]], servers: int = 1
) -> list[dict[str, Any]]:
    """The issue's figures, one row each (bench JSON protocol): p50 ratio per cell."""
    return [
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
        for name, cells in results.items()
        for concurrency, cell in zip(CONCURRENCY, cells, strict=True)
    ]


def main() -> None:
    parser = bench_parser(
        __doc__, f"a short run: {QUICK_REQUESTS} requests per cell", "sqlite,postgresql"
    )
    parser.add_argument("--requests", type=int, default=200, help="paid requests per path and cell")
    parser.add_argument(
        "--servers", type=int, default=1, help="reference server processes sharing the database"
    )
    parser.add_argument("--serve-seller", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--facilitator", help=argparse.SUPPRESS)
    parser.add_argument("--pay-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_seller:
        serve_seller(args.port, args.facilitator, args.pay_to)
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
    report_cell_failures(results)


if __name__ == "__main__":
    main()

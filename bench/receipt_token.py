"""The gate's first sight of a receipt: a signed receipt token verified offline against
today's ``POST /access/verify`` round trip.

Run: ``python bench/receipt_token.py`` (about 20 s; ``--quick`` about 8 s; ``--json
PATH`` writes the protocol rows of bench/_report.py; ``--databases sqlite,postgresql``).

The reference server runs in its own uvicorn process on a fresh database; an agent pays
one resource ``--receipts`` times (``POST /pay``), keeping each payment's receipt id and
its ``receipt_token``.  A :class:`svc_asgi.GateCore` over the seller's client (the gate
``PaymentGate`` runs) has the resource's offer and the service's keys already (as any
gate after its first request), then decides each receipt once, never seen before: by
token (Ed25519 signature checked in process, no request) and by id (one
``POST /access/verify`` over a keep-alive connection, the database read on the server).
Rounds alternate which side goes first; the figure is the median per-call time of each
and their ratio (target: the token at most a quarter of the round trip).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _harness import (
    bench_parser,
    chosen_databases,
    fresh_database,
    funded_wallet_key,
    new_seller,
    reference_server,
)
from _report import time_ratio_row, write_rows

import svc
from svc_asgi import GateCore, Paid, ServiceBackend

TARGET = 0.25
ROUNDS = 10


def paid_receipts(url: str, count: int) -> tuple[str, str, list[tuple[str, str]]]:
    """``(seller key, resource id, [(receipt id, token)])``: ``count`` payments."""
    with httpx.Client(base_url=url, timeout=30) as http:
        seller_key = str(new_seller(http)["seller_key"])
        key = funded_wallet_key(http, "1000.00")
    with svc.Client(base_url=url, seller_key=seller_key) as seller:
        resource = seller.resources.create(kind="http", path="/v1/report", amount="0.01")
    receipts = []
    with svc.Client(base_url=url, wallet_key=key["key"]) as agent:
        for _ in range(count):
            paid = agent.pay(resource_id=resource.id)
            if paid.receipt_token is None:
                raise SystemExit("POST /pay answered without a receipt_token")
            receipts.append((paid.receipt_id, paid.receipt_token))
    return seller_key, resource.id, receipts


async def first_sight(
    url: str, seller_key: str, resource_id: str, receipts: list[tuple[str, str]]
) -> tuple[list[float], list[float]]:
    """Per-round mean seconds per first-seen receipt: by token, and by id."""
    async with svc.AsyncClient(base_url=url, seller_key=seller_key, max_retries=0) as client:
        core = GateCore(ServiceBackend(client))
        warm_id, warm_token = receipts[0]
        for value in (warm_token, warm_id):  # the offer, the keys, the connection
            if type(await core.check(resource_id, {"x-svc-receipt": value})) is not Paid:
                raise SystemExit("the warm-up receipt was refused")
        rest = receipts[1:]
        size = len(rest) // ROUNDS
        by_token: list[float] = []
        by_id: list[float] = []
        for n in range(ROUNDS):
            chunk = rest[n * size : (n + 1) * size]
            sides = [(by_token, [t for _, t in chunk]), (by_id, [i for i, _ in chunk])]
            for times, values in sides if n % 2 == 0 else sides[::-1]:
                start = time.perf_counter()
                for value in values:
                    outcome = await core.check(resource_id, {"x-svc-receipt": value})
                    if type(outcome) is not Paid:
                        raise SystemExit(f"a paid receipt was refused: {outcome}")
                times.append((time.perf_counter() - start) / len(values))
    return by_token, by_id


def main() -> None:
    parser = bench_parser(__doc__, "a short, noisier run", "sqlite")
    parser.add_argument("--receipts", type=int, default=1001, help="payments made, then decided")
    args = parser.parse_args()
    if args.quick:
        args.receipts = 201
    print(f"Gate's first sight of a receipt: {args.receipts - 1} receipts, {ROUNDS} rounds")
    header = f"{'database':>10}  {'token µs':>9}  {'verify µs':>10}  {'token/verify':>12}"
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for database in chosen_databases(parser, args):
        with (
            fresh_database(database, args.postgres_url) as database_url,
            tempfile.TemporaryDirectory(prefix="svc-bench-") as logs,
            reference_server(database_url, Path(logs) / "server.log") as (url, _),
        ):
            seller_key, resource_id, receipts = paid_receipts(url, args.receipts)
            by_token, by_id = asyncio.run(first_sight(url, seller_key, resource_id, receipts))
        token_us, id_us = statistics.median(by_token) * 1e6, statistics.median(by_id) * 1e6
        print(f"{database:>10}  {token_us:>9.1f}  {id_us:>10.1f}  {token_us / id_us:>12.3f}")
        rows.append(
            time_ratio_row(
                "gate first-sight receipt: signed token vs POST /access/verify",
                token_us,
                id_us,
                unit="µs",
                baseline_name="POST /access/verify round trip",
                target=TARGET,
                database=database,
                setting="1 gate, keep-alive",
            )
        )
    if args.json:
        write_rows(args.json, rows)


if __name__ == "__main__":
    main()

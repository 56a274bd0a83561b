"""The dashboard's payments page for a seller with 100,000 payments, beside the same page
for a seller with 100 (same server, same run).

Run: ``python bench/dashboard.py`` (``--quick``: 20,000 payments; ``--json PATH`` writes
the protocol rows of bench/_report.py; ``--databases sqlite,postgresql``).

The reference server runs in its own uvicorn process on a fresh database.  One owner has
two sellers; their receipts are inserted straight into the ``receipts`` table (the page
reads only that table, and inserting 100,000 real payments would take the bench's whole
time).  The owner signs in through a one-time link, then ``GET /dashboard/payments``
for each seller is timed in alternating rounds, first page and one deep in the list (a
``starting_after`` cursor half-way down): the keyset on ``(seller_id, created_at)`` keeps
both near the small seller's time.  Target: at most twice the small seller's time, and
well under a second.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from _harness import bench_parser, chosen_databases, fresh_database, new_owner, post_json
from _harness import reference_server as serve
from _report import time_ratio_row, write_rows

from reference_server.store import tables as t

TARGET = 2.0
ROUNDS = 10
CALLS = 5
BASELINE = 100


def insert_payments(database_url: str, seller_id: str, count: int) -> list[str]:
    """``count`` settled rill receipts of the seller, a minute apart, newest last; their ids."""
    url = database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url)
    start = datetime.now(UTC) - timedelta(minutes=count)
    ids = [f"rcpt_bench{seller_id[-6:]}{i:08d}" for i in range(count)]
    try:
        with engine.begin() as conn:
            for offset in range(0, count, 5000):
                conn.execute(
                    t.receipts.insert(),
                    [
                        {
                            "id": ids[i],
                            "environment": "test",
                            "kind": "resource",
                            "rail": "rill",
                            "settlement": "ledger",
                            "amount_micros": 1_000_000,
                            "fee_micros": 10_000,
                            "seller_id": seller_id,
                            "status": "settled",
                            "refunded_micros": 0,
                            "created_at": start + timedelta(minutes=i),
                        }
                        for i in range(offset, min(offset + 5000, count))
                    ],
                )
    finally:
        engine.dispose()
    return ids


def timed(client: httpx.Client, params: dict[str, str]) -> float:
    """Mean seconds of one ``GET /dashboard/payments`` (200, with a full page)."""
    start = time.perf_counter()
    for _ in range(CALLS):
        r = client.get("/dashboard/payments", params=params)
        if r.status_code != 200 or r.text.count('<tr id="payment-') != 50:
            raise SystemExit(f"the payments page answered {r.status_code}: {r.text[:300]}")
    return (time.perf_counter() - start) / CALLS


def measure(database_url: str, url: str, payments: int) -> dict[str, tuple[float, float]]:
    """Median seconds per page: ``{place: (big seller, small seller)}``."""
    with httpx.Client(base_url=url, timeout=60) as http:
        owner, auth = new_owner(http)
        headers = {"Authorization": auth, "X-Svc-Environment": "test"}
        big = post_json(http, "/sellers", {"name": "big shop"}, **headers)["id"]
        small = post_json(http, "/sellers", {"name": "small shop"}, **headers)["id"]
        link = post_json(http, "/owners/me/dashboard-link", {}, Authorization=auth)["url"]
    big_ids = insert_payments(database_url, big, payments)
    small_ids = insert_payments(database_url, small, BASELINE)
    client = httpx.Client(base_url=url, timeout=60)
    try:
        if client.get(link).status_code != 303:
            raise SystemExit("the sign-in link was refused")
        places = {
            "first page": ({"seller": big}, {"seller": small}),
            "half-way": (
                {"seller": big, "starting_after": big_ids[len(big_ids) // 2]},
                {"seller": small, "starting_after": small_ids[len(small_ids) - 1]},
            ),
        }
        out = {}
        for place, (big_q, small_q) in places.items():
            timed(client, big_q), timed(client, small_q)  # warm both
            bigs, smalls = [], []
            for n in range(ROUNDS):
                sides = [(bigs, big_q), (smalls, small_q)]
                for times, query in sides if n % 2 == 0 else sides[::-1]:
                    times.append(timed(client, query))
            out[place] = (statistics.median(bigs), statistics.median(smalls))
        return out
    finally:
        client.close()
        del owner


def main() -> None:
    parser = bench_parser(__doc__, "20,000 payments instead of 100,000", "sqlite")
    parser.add_argument("--payments", type=int, default=100_000)
    args = parser.parse_args()
    if args.quick:
        args.payments = 20_000
    print(f"Dashboard payments page: {args.payments} payments vs {BASELINE}, 50 a page")
    header = f"{'database':>10}  {'page':>10}  {'big ms':>8}  {'small ms':>8}  {'ratio':>6}"
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for database in chosen_databases(parser, args):
        with (
            fresh_database(database, args.postgres_url) as database_url,
            tempfile.TemporaryDirectory(prefix="svc-bench-") as logs,
            serve(database_url, Path(logs) / "server.log") as (url, _),
        ):
            figures = measure(database_url, url, args.payments)
        for place, (big, small) in figures.items():
            ratio = big / small
            print(
                f"{database:>10}  {place:>10}  {big * 1e3:>8.2f}  {small * 1e3:>8.2f}"
                f"  {ratio:>6.2f}"
            )
            rows.append(
                time_ratio_row(
                    f"dashboard payments page, {args.payments} payments ({place})",
                    big * 1e3,
                    small * 1e3,
                    unit="ms",
                    baseline_name=f"the same page, {BASELINE} payments",
                    target=TARGET,
                    database=database,
                    setting="1 client, keep-alive",
                )
            )
    if args.json:
        write_rows(args.json, rows)


if __name__ == "__main__":
    main()

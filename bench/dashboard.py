"""The dashboard's pages for a seller with 100,000 payments, beside the same pages with 100
(same server, same run).

Run: ``python bench/dashboard.py`` (``--quick``: 20,000 payments; ``--json PATH`` writes
the protocol rows of bench/_report.py; ``--databases sqlite,postgresql``).

The reference server runs in its own uvicorn process on a fresh database.  One owner has
two sellers, a second owner one; their receipts (a minute apart, so 30 days hold 43,200
of the 100,000) are inserted straight into the ``receipts`` table (the pages read only
that table, and inserting 100,000 real payments would take the bench's whole time).
Each owner signs in through a one-time link; then, in alternating rounds: the overview
(sellers and 30 days of sales by day, summed by the database) of the big seller's owner
against the other owner's, and ``GET /dashboard/payments`` of the big seller against the
small one, first page and one deep in the list (a ``starting_after`` cursor half-way
down), where the keyset on ``(seller_id, created_at)`` keeps both near the small
seller's time.  Target: at most twice the small seller's time, and well under a second.
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
        if engine.dialect.name == "postgresql":
            # as autovacuum would soon after such a load: without statistics the planner
            # takes the new rows for a handful and sorts them all instead of reading the
            # index
            with engine.begin() as conn:
                conn.execute(sa.text("ANALYZE receipts"))
    finally:
        engine.dispose()
    return ids


def timed(client: httpx.Client, path: str, params: dict[str, str]) -> float:
    """Mean seconds of one ``GET`` of a dashboard page (200; the payments page full)."""
    start = time.perf_counter()
    for _ in range(CALLS):
        r = client.get(path, params=params)
        full = path != "/dashboard/payments" or r.text.count('<tr id="payment-') == 50
        if r.status_code != 200 or not full:
            raise SystemExit(f"{path} answered {r.status_code}: {r.text[:300]}")
    return (time.perf_counter() - start) / CALLS


def signed_in(url: str, link: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60)
    if client.get(link).status_code != 303:
        raise SystemExit("the sign-in link was refused")
    return client


def measure(database_url: str, url: str, payments: int) -> dict[str, tuple[float, float]]:
    """Median seconds per page: ``{place: (big seller, small seller)}``."""
    with httpx.Client(base_url=url, timeout=60) as http:
        owner, auth = new_owner(http)
        headers = {"Authorization": auth, "X-Svc-Environment": "test"}
        big = post_json(http, "/sellers", {"name": "big shop"}, **headers)["id"]
        small = post_json(http, "/sellers", {"name": "small shop"}, **headers)["id"]
        link = post_json(http, "/owners/me/dashboard-link", {}, Authorization=auth)["url"]
        other, other_auth = new_owner(http)
        other_headers = {"Authorization": other_auth, "X-Svc-Environment": "test"}
        alone = post_json(http, "/sellers", {"name": "lone shop"}, **other_headers)["id"]
        other_link = post_json(http, "/owners/me/dashboard-link", {}, Authorization=other_auth)[
            "url"
        ]
    big_ids = insert_payments(database_url, big, payments)
    small_ids = insert_payments(database_url, small, BASELINE)
    insert_payments(database_url, alone, BASELINE)
    client, baseline_client = signed_in(url, link), signed_in(url, other_link)
    try:
        # the overview sums 30 days of the owner's sales: the big seller's owner against an
        # owner whose one seller has the baseline's payments
        places = {
            "overview": (
                (client, "/dashboard", {}),
                (baseline_client, "/dashboard", {}),
            ),
            "first page": (
                (client, "/dashboard/payments", {"seller": big}),
                (client, "/dashboard/payments", {"seller": small}),
            ),
            "half-way": (
                (
                    client,
                    "/dashboard/payments",
                    {"seller": big, "starting_after": big_ids[len(big_ids) // 2]},
                ),
                (
                    client,
                    "/dashboard/payments",
                    {"seller": small, "starting_after": small_ids[len(small_ids) - 1]},
                ),
            ),
        }
        out = {}
        for place, (big_q, small_q) in places.items():
            timed(*big_q), timed(*small_q)  # warm both
            bigs, smalls = [], []
            for n in range(ROUNDS):
                sides = [(bigs, big_q), (smalls, small_q)]
                for times, query in sides if n % 2 == 0 else sides[::-1]:
                    times.append(timed(*query))
            out[place] = (statistics.median(bigs), statistics.median(smalls))
        return out
    finally:
        client.close()
        baseline_client.close()
        del owner, other


def main() -> None:
    parser = bench_parser(__doc__, "20,000 payments instead of 100,000", "sqlite")
    parser.add_argument("--payments", type=int, default=100_000)
    args = parser.parse_args()
    if args.quick:
        args.payments = 20_000
    print(f"Dashboard pages: {args.payments} payments vs {BASELINE} (payments: 50 a page)")
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
                    f"dashboard {place}, {args.payments} payments",
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

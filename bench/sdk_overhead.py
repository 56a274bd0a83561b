"""Per-call time of the SDK against a raw httpx call making the identical request.

Run: ``python bench/sdk_overhead.py`` (about 30 s; ``--quick`` about 10 s; ``--json PATH``
writes the protocol rows of bench/_report.py; ``--databases sqlite,postgresql``).

The reference server runs in its own uvicorn process on a fresh database.  Both sides call
``GET /sellers/me`` with the same seller key over one keep-alive connection and read the
answer: ``svc.Client.sellers.me()`` (a typed ``svc.Seller``) against ``httpx.Client.get``
with the same headers and ``response.json()``; then ``svc.AsyncClient`` against
``httpx.AsyncClient`` the same way.  Rounds alternate which side goes first, so a busy
machine slows both alike; the ratio is the median of the per-round ratios of mean call
times, the figure the target (SDK <= 1.1x raw httpx) is about.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    bench_parser,
    chosen_databases,
    fresh_database,
    new_seller,
    reference_server,
)
from _report import row, write_rows

import svc
from svc._base_client import USER_AGENT

TARGET = 1.1


def set_up(url: str) -> str:
    """A seller in the test environment; its seller key."""
    with httpx.Client(base_url=url, timeout=30) as http:
        return str(new_seller(http)["seller_key"])


def raw_headers(seller_key: str) -> dict[str, str]:
    """What ``svc.Client(seller_key=...)`` sends for ``sellers.me()``, byte for byte."""
    return {
        "User-Agent": USER_AGENT,
        "Accept": "application/json",
        "Authorization": f"Bearer {seller_key}",
    }


@attrs.define
class Rounds:
    """Per-round mean seconds per call of the SDK and of raw httpx."""

    sdk: list[float] = attrs.Factory(list)
    raw: list[float] = attrs.Factory(list)

    def add(self, sdk: float, raw: float) -> None:
        self.sdk.append(sdk)
        self.raw.append(raw)

    @property
    def ratio(self) -> float:
        return statistics.median(s / r for s, r in zip(self.sdk, self.raw, strict=True))


def timed(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


async def atimed(call: Callable[[], Awaitable[object]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls


def measure_sync(url: str, seller_key: str, rounds: int, calls: int) -> Rounds:
    result = Rounds()
    with (
        svc.Client(base_url=url, seller_key=seller_key) as client,
        httpx.Client(base_url=url, headers=raw_headers(seller_key)) as http,
    ):
        seller_id = client.sellers.me().id

        def sdk() -> object:
            return client.sellers.me()

        def raw() -> object:
            response = http.get("/sellers/me")
            if response.status_code != 200:
                raise SystemExit(f"raw GET /sellers/me -> {response.status_code}")
            return response.json()

        assert raw()["id"] == seller_id
        timed(sdk, calls // 4 or 1), timed(raw, calls // 4 or 1)  # warm both
        for i in range(rounds):
            if i % 2:
                r, s = timed(raw, calls), timed(sdk, calls)
            else:
                s, r = timed(sdk, calls), timed(raw, calls)
            result.add(s, r)
    return result


async def measure_async(url: str, seller_key: str, rounds: int, calls: int) -> Rounds:
    result = Rounds()
    async with (
        svc.AsyncClient(base_url=url, seller_key=seller_key) as client,
        httpx.AsyncClient(base_url=url, headers=raw_headers(seller_key)) as http,
    ):
        seller_id = (await client.sellers.me()).id

        async def sdk() -> object:
            return await client.sellers.me()

        async def raw() -> object:
            response = await http.get("/sellers/me")
            if response.status_code != 200:
                raise SystemExit(f"raw GET /sellers/me -> {response.status_code}")
            return response.json()

        assert (await raw())["id"] == seller_id
        await atimed(sdk, calls // 4 or 1)
        await atimed(raw, calls // 4 or 1)
        for i in range(rounds):
            if i % 2:
                r, s = await atimed(raw, calls), await atimed(sdk, calls)
            else:
                s, r = await atimed(sdk, calls), await atimed(raw, calls)
            result.add(s, r)
    return result


def protocol_rows(database: str, measured: dict[str, Rounds]) -> list[dict[str, Any]]:
    return [
        row(
            "SDK call overhead (GET /sellers/me)",
            database=database,
            setting=setting,
            value=round(statistics.median(rounds.sdk) * 1e6, 1),
            unit="µs",
            baseline_name="raw " + ("httpx.AsyncClient" if "async" in setting else "httpx.Client"),
            baseline=round(statistics.median(rounds.raw) * 1e6, 1),
            ratio=round(rounds.ratio, 3),
            target=f"<= {TARGET}",
            met=rounds.ratio <= TARGET,
        )
        for setting, rounds in measured.items()
    ]


def main() -> None:
    parser = bench_parser(__doc__, "a short, noisier run", "sqlite")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200, help="per side and round")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.calls = 4, 100

    print(
        f"SDK call overhead: GET /sellers/me, {args.rounds} alternating rounds of "
        f"{args.calls} calls per side, one keep-alive connection each"
    )
    header = f"{'database':>10}  {'client':>6}  {'svc µs':>8}  {'httpx µs':>9}  {'svc/httpx':>9}"
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for database in chosen_databases(parser, args):
        with (
            fresh_database(database, args.postgres_url) as database_url,
            tempfile.TemporaryDirectory(prefix="svc-bench-") as logs,
            reference_server(database_url, Path(logs) / "server.log") as (url, _),
        ):
            seller_key = set_up(url)
            measured = {
                "sync, 1 client": measure_sync(url, seller_key, args.rounds, args.calls),
                "async, 1 client": asyncio.run(
                    measure_async(url, seller_key, args.rounds, args.calls)
                ),
            }
        for setting, rounds in measured.items():
            print(
                f"{database:>10}  {setting.split(',')[0]:>6}"
                f"  {statistics.median(rounds.sdk) * 1e6:>8.1f}"
                f"  {statistics.median(rounds.raw) * 1e6:>9.1f}  {rounds.ratio:>9.3f}"
            )
        rows += protocol_rows(database, measured)
    if args.json:
        write_rows(args.json, rows)


if __name__ == "__main__":
    main()

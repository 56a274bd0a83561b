"""A metered, streamed answer through ``svc_asgi.PaymentGate``: time to first token and
tokens/s vs the same app ungated, and beside x402's own middleware on the same app.

Run: ``python bench/stream_gate.py`` (about 2 minutes; ``--quick`` about 40 s).

The app is an LLM stand-in: ``GET /stream`` answers ``text/event-stream``, one event per
token, reporting each token to the gate (``scope["extensions"]["svc.usage"]``; ungated,
nothing to report to).  Two settings: **paced** (the first token after 250 ms, then 200
tokens one every 5 ms: a model's pace) and **unpaced** (20,000 tokens as fast as the app
sends them: the gate's own ceiling).  Three uvicorn servers on loopback, each its own
process (this script with ``--serve``):

- ``plain``: the app alone (the baseline);
- ``gate``: the app behind ``PaymentGate`` selling ``GET /stream`` as a metered resource
  (0.0001 a token, at most 0.50) of a reference server (a fresh SQLite file, payments
  enabled): every request is paid by the official x402 client with ``upto`` (a fresh
  Permit2 authorization of the maximum), the gate claims it, streams the tokens
  unbuffered and settles the tokens delivered after the last one, appending the
  ``svc-receipt`` event (checked: tokens x unit price);
- ``x402``: the app behind x402's own ``PaymentMiddlewareASGI`` (``exact``, through the
  same sandbox facilitator), which buffers the whole answer before it settles and sends
  it: its first token arrives with its last (paced setting only).

Each request is timed from sending the *paid* request (the 402 probe and the signing come
before it, alike for both paid paths) to the first token's bytes (time to first token),
and from the first token to the last (tokens/s); the gate's settlement after the last
token is shown apart.  ``--requests`` per server and setting, in rounds alternating the
order of the servers; medians.

``--json PATH`` rows: the gate's paced TTFT and both settings' tokens/s as ratios to the
plain app's (target >= 0.95: baseline over gate for time, gate over baseline for rate),
and x402's middleware's TTFT (reported).  Exits 1 when a request is not answered 200 or
a settled amount is not tokens x unit price.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import httpx
from _harness import (
    bench_parser,
    new_seller,
    post_json,
    progress,
    reference_server,
    script_server,
    sqlite_database,
)
from _report import row

from svc.money import metered_amount

UNIT_PRICE = "0.0001"
MAX_AMOUNT = "0.50"
TARGET = 0.95
VARIANTS = ("plain", "gate", "x402")
NETWORK = "eip155:84532"


# --- the app (run in the --serve processes) -------------------------------------------------


def stream_app() -> Any:
    """The LLM stand-in: ``GET /stream?tokens=N&first_ms=F&gap_ms=G``, one SSE event per
    token (the first after F ms, then one every G ms), each reported to the gate."""
    from urllib.parse import parse_qs

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        query = {k: float(v[0]) for k, v in parse_qs(scope["query_string"].decode()).items()}
        tokens, first, gap = int(query["tokens"]), query["first_ms"] / 1000, query["gap_ms"] / 1000
        usage = scope.get("extensions", {}).get("svc.usage")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await asyncio.sleep(first)
        for i in range(tokens):
            if i and gap:
                await asyncio.sleep(gap)
            if usage is not None:
                usage(1)
            body = f"data: tok{i}\n\n".encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    app = stream_app()
    if args.serve == "gate":
        from svc_asgi import PaymentGate

        app = PaymentGate(app, prices={"GET /stream": os.environ["BENCH_RESOURCE_ID"]})
    elif args.serve == "x402":
        from x402 import x402ResourceServer
        from x402.http import FacilitatorConfig, HTTPFacilitatorClient
        from x402.http.middleware.fastapi import PaymentMiddlewareASGI
        from x402.mechanisms.evm.exact import register_exact_evm_server

        server = x402ResourceServer(
            HTTPFacilitatorClient(FacilitatorConfig(url=os.environ["BENCH_FACILITATOR"]))
        )
        register_exact_evm_server(server, NETWORK)
        price = f"${Decimal(UNIT_PRICE) * SHAPES[0].tokens}"
        accepts = {"scheme": "exact", "payTo": os.environ["BENCH_PAY_TO"], "price": price}
        routes = {"GET /stream": {"accepts": {**accepts, "network": NETWORK}}}
        app = _Starlette(app, PaymentMiddlewareASGI, routes=routes, server=server)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


def _Starlette(app: Any, middleware: Any, **options: Any) -> Any:
    """x402's middleware is Starlette's kind: mount the bare app in a Starlette app."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    outer = Starlette(routes=[Mount("/", app=app)])
    outer.add_middleware(middleware, **options)
    return outer


# --- set-up over plain HTTP -----------------------------------------------------------------


def set_up(url: str) -> dict[str, str]:
    """A seller with payments enabled selling the stream metered; a funded payer."""
    from eth_account import Account

    payer = Account.create()
    with httpx.Client(base_url=url, timeout=30) as http:
        made = new_seller(http, "test")
        key = f"Bearer {made['seller_key']}"
        resource = post_json(
            http,
            "/resources",
            {
                "kind": "http",
                "path": "/stream",
                "pricing": "metered",
                "unit_price": UNIT_PRICE,
                "unit": "token",
                "max_amount": MAX_AMOUNT,
            },
            Authorization=key,
        )
        r = http.patch("/sellers/me/payments", json={}, headers={"Authorization": key})
        if r.status_code >= 300:
            raise SystemExit(f"set-up failed: enable payments -> {r.status_code} {r.text}")
        post_json(http, "/sandbox/faucet", {"address": payer.address, "amount": "1000"})
    return {
        "SVC_BASE_URL": url,
        "SVC_SELLER_KEY": str(made["seller_key"]),
        "SVC_ENVIRONMENT": "test",
        "BENCH_RESOURCE_ID": str(resource["id"]),
        "BENCH_PAYER_KEY": payer.key.hex(),
        "BENCH_FACILITATOR": url + "/sandbox/x402",
        "BENCH_PAY_TO": "0x" + "22" * 20,
    }


# --- one request ----------------------------------------------------------------------------


@attrs.define
class Timing:
    first_token: float
    tokens_per_s: float
    #: From the last token to the ``svc-receipt`` event (the gate only).
    settle: float | None = None
    receipt: dict[str, Any] | None = None


async def _events(response: httpx.Response) -> AsyncIterator[tuple[float, str]]:
    """Each SSE event's text as its last byte arrives, with the time."""
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            event, buffer = buffer.split("\n\n", 1)
            yield time.perf_counter(), event


async def timed(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> Timing:
    started = time.perf_counter()
    token_times: list[float] = []
    receipt: tuple[float, dict[str, Any]] | None = None
    async with http.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            raise SystemExit(f"GET {url} -> {response.status_code}: {response.text}")
        async for at, event in _events(response):
            if event.startswith("event: svc-receipt"):
                data = event.split("data: ", 1)[1]
                receipt = (at, json.loads(data))
            elif event.startswith("data: tok"):
                token_times.append(at)
    first, last = token_times[0], token_times[-1]
    rate = (len(token_times) - 1) / (last - first)
    if receipt is None:
        return Timing(first - started, rate)
    return Timing(first - started, rate, receipt[0] - last, receipt[1])


async def paid_headers(http: httpx.AsyncClient, client: Any, url: str) -> dict[str, str]:
    """Probe ``url`` for its 402 and sign what it asks with the official x402 client."""
    from x402.http import x402HTTPClient

    probe = await http.get(url)
    if probe.status_code != 402:
        raise SystemExit(f"GET {url} unpaid -> {probe.status_code}, not 402")
    helper = x402HTTPClient(client)
    required = helper.get_payment_required_response(probe.headers.get, None)
    payload = await client.create_payment_payload(required)
    return dict(helper.encode_payment_signature_header(payload))


# --- the run --------------------------------------------------------------------------------


@attrs.frozen
class Shape:
    """One setting: how the stand-in streams."""

    name: str
    tokens: int
    first_ms: float
    gap_ms: float
    variants: tuple[str, ...]

    @property
    def query(self) -> str:
        return f"?tokens={self.tokens}&first_ms={self.first_ms:g}&gap_ms={self.gap_ms:g}"


#: An LLM's pace (250 ms to the first token, then one every 5 ms: about 2 s in all), and the
#: gate's own ceiling (20,000 tokens as fast as the app can send them; x402's middleware
#: buffers whole answers, so it has no per-token figure to compare).
SHAPES = (
    Shape("paced", 200, 250, 5, VARIANTS),
    Shape("unpaced", 20_000, 0, 0, ("plain", "gate")),
)


async def measure(
    urls: dict[str, str], env: dict[str, str], requests: int
) -> dict[str, dict[str, list[Timing]]]:
    """Per shape, per server: each measured request's timing (rounds alternate the order
    of the servers, so a drifting machine moves both alike)."""
    from eth_account import Account
    from x402 import x402Client
    from x402.mechanisms.evm.exact import ExactEvmClientScheme
    from x402.mechanisms.evm.signers import EthAccountSigner
    from x402.mechanisms.evm.upto import UptoEvmClientScheme

    payer = Account.from_key(env["BENCH_PAYER_KEY"])
    upto = x402Client().register("eip155:*", UptoEvmClientScheme(EthAccountSigner(payer)))
    exact = x402Client().register("eip155:*", ExactEvmClientScheme(EthAccountSigner(payer)))
    clients = {"gate": upto, "x402": exact}
    results: dict[str, dict[str, list[Timing]]] = {}
    async with httpx.AsyncClient(timeout=60) as http:
        for shape in SHAPES:
            results[shape.name] = {v: [] for v in shape.variants}
            for i in range(requests + 1):  # the first round warms up
                order = shape.variants if i % 2 else tuple(reversed(shape.variants))
                for variant in order:
                    url = urls[variant] + "/stream" + shape.query
                    headers = {}
                    if variant in clients:
                        headers = await paid_headers(http, clients[variant], url)
                    timing = await timed(http, url, headers)
                    if i:
                        results[shape.name][variant].append(timing)
            expected = metered_amount(shape.tokens, Decimal(UNIT_PRICE), Decimal(MAX_AMOUNT))
            for timing in results[shape.name]["gate"]:
                settled = timing.receipt and Decimal(str(timing.receipt["amount"]))
                if settled != expected:
                    raise SystemExit(f"the gate settled {timing.receipt}, not {expected}")
    return results


def main() -> None:
    parser = bench_parser(__doc__ or "", "8 requests per server and setting instead of 30")
    parser.add_argument("--serve", choices=VARIANTS)
    parser.add_argument("--port", type=int)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return
    requests = 8 if args.quick else args.requests
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="svc-bench-")))
        database = stack.enter_context(sqlite_database())
        url, _ = stack.enter_context(reference_server(database, logs / "server.log"))
        env = set_up(url)
        urls = {}
        for variant in VARIANTS:
            command = [__file__, "--serve", variant]
            served = script_server(command, "/", logs / f"{variant}.log", {**os.environ, **env})
            urls[variant], _ = stack.enter_context(served)
        progress(f"{requests} requests per server and setting...")
        results = asyncio.run(measure(urls, env, requests))
    report(results, args.json)


def _median(timings: list[Timing], field: str) -> float:
    return statistics.median(getattr(t, field) for t in timings)


def report(results: dict[str, dict[str, list[Timing]]], json_path: Path | None) -> None:
    print(f"\n{'setting':<8} {'server':<6} {'TTFT ms':>9} {'tokens/s':>10} {'receipt ms':>11}")
    for shape in SHAPES:
        for v in shape.variants:
            timings = results[shape.name][v]
            rate = "buffered" if v == "x402" else f"{_median(timings, 'tokens_per_s'):.0f}"
            after = "" if v != "gate" else f"{_median(timings, 'settle') * 1000:.1f}"
            ttft = _median(timings, "first_token") * 1000
            print(f"{shape.name:<8} {v:<6} {ttft:>9.1f} {rate:>10} {after:>11}")
    print("receipt ms: from the last token to the svc-receipt event (the settlement).")
    paced, unpaced = results["paced"], results["unpaced"]
    rows = []
    ttft = {v: _median(paced[v], "first_token") * 1000 for v in VARIANTS}
    rows.append(
        row(
            "metered stream: time to first token through the gate",
            value=round(ttft["gate"], 1),
            unit="ms",
            setting="paced, 200 tokens",
            baseline_name="the app ungated",
            baseline=round(ttft["plain"], 1),
            ratio=round(ttft["plain"] / ttft["gate"], 3),
            target=f">= {TARGET}",
            met=ttft["plain"] / ttft["gate"] >= TARGET,
        )
    )
    for name, cell in (("paced, 200 tokens", paced), ("unpaced, 20000 tokens", unpaced)):
        rate = {v: _median(cell[v], "tokens_per_s") for v in ("plain", "gate")}
        rows.append(
            row(
                "metered stream: tokens/s through the gate",
                value=round(rate["gate"], 1),
                unit="tokens/s",
                setting=name,
                baseline_name="the app ungated",
                baseline=round(rate["plain"], 1),
                ratio=round(rate["gate"] / rate["plain"], 3),
                target=f">= {TARGET}",
                met=rate["gate"] / rate["plain"] >= TARGET,
            )
        )
    rows.append(
        row(
            "metered stream: time to first token, x402's middleware (buffers the answer)",
            value=round(ttft["x402"], 1),
            unit="ms",
            setting="paced, 200 tokens",
            baseline_name="the app ungated",
            baseline=round(ttft["plain"], 1),
            ratio=round(ttft["plain"] / ttft["x402"], 3),
            target="reported",
            met=True,
        )
    )
    if json_path is not None:
        json_path.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())

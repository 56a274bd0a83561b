"""What the benches share: servers on free ports, a fresh database per run (an SQLite file
or a PostgreSQL schema dropped afterwards), the set-up calls, the closed loop, the tables,
the parser and the refusal to pass failed requests off as figures."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import platform
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import attrs
import httpx

#: The PostgreSQL every bench uses unless told otherwise (CI's and this machine's).
DEFAULT_POSTGRES = os.environ.get(
    "SVC_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def post_json(
    http: httpx.Client, path: str, body: dict[str, Any], **headers: str
) -> dict[str, Any]:
    """A set-up call: its JSON answer, or the bench stops naming what failed."""
    r = http.post(path, json=body, headers=headers)
    if r.status_code >= 300:
        raise SystemExit(f"set-up failed: POST {path} -> {r.status_code} {r.text}")
    return dict(r.json())


def new_owner(http: httpx.Client) -> tuple[dict[str, Any], str]:
    """A new owner, and its ``Authorization`` header value."""
    owner = post_json(http, "/owners", {"email": f"b{secrets.token_hex(6)}@example.com"})
    return owner, f"Bearer {owner['owner_jwt']}"


def new_seller(http: httpx.Client, environment: str = "test") -> dict[str, Any]:
    """A new owner's seller in ``environment`` (its ``seller_key`` among the rest)."""
    _, auth = new_owner(http)
    headers = {"Authorization": auth, "X-Svc-Environment": environment}
    return post_json(http, "/sellers", {"name": "bench shop"}, **headers)


def funded_wallet_key(http: httpx.Client, amount: str) -> dict[str, Any]:
    """A new owner's test wallet key (``id``, ``key``), funded with ``amount``."""
    _, auth = new_owner(http)
    headers = {"Authorization": auth, "X-Svc-Environment": "test"}
    key = post_json(http, "/wallet-keys", {"name": "bench agent"}, **headers)
    post_json(http, f"/wallet-keys/{key['id']}/fund", {"amount": amount}, **headers)
    return key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="svc-bench-") as directory:
        yield f"sqlite:///{Path(directory) / 'svc.db'}"


@contextmanager
def postgres_database(url: str) -> Iterator[str]:
    """A schema of its own, created for the configuration and dropped after it."""
    import psycopg

    schema = "bench_" + secrets.token_hex(6)
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        sep = "&" if "?" in url else "?"
        yield f"{url}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def postgres_version(url: str) -> str:
    try:
        import psycopg

        plain = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(plain, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {row[0].split()[0] if row else '?'}"
    except Exception:  # no server, no driver: the line says so rather than failing the run
        return "PostgreSQL not reachable"


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process so far (Linux ``/proc``; ``None`` elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def serving(
    args: list[str],
    env: dict[str, str],
    probe_url: str | None,
    log_path: Path,
    *,
    any_status: bool = False,
) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess (output to ``log_path``), once ``probe_url`` answers (200, or anything
    with ``any_status``); stopped on exit.  The bench stops with the log if the process
    exits or is not up within 60 s."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    try:
        while probe_url is not None:
            if process.poll() is not None:
                raise SystemExit(
                    f"{probe_url}: exited ({process.returncode}):\n{log_path.read_text()}"
                )
            if time.monotonic() > deadline:
                raise SystemExit(f"{probe_url} did not come up in 60 s:\n{log_path.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(probe_url, timeout=2).status_code == 200 or any_status:
                    break
            time.sleep(0.05)
        yield process
    finally:
        stop_process(process)


@contextmanager
def reference_server(
    database_url: str, log_path: Path, *, script: Path | None = None, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m reference_server run`` (or ``script``, which takes ``--port`` too) on a
    free port with rate limits out of the way (``env``: more ``SVC_*`` variables); yields
    (base URL, process) once ``/ready``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    variables = {
        **os.environ,
        "SVC_DATABASE_URL": database_url,
        "SVC_RATE_LIMIT": "1000000/second",
        "SVC_PUBLIC_URL": url,
        **env,
    }
    command = ["-m", "reference_server", "run"] if script is None else [str(script)]
    args = [sys.executable, *command, "--port", str(port)]
    with serving(args, variables, url + "/ready", log_path) as process:
        yield url, process


def report_app() -> Any:
    """A seller's Starlette app: ``GET /report`` answers a small JSON document."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def report(request: Request) -> JSONResponse:
        return JSONResponse({"report": "the goods", "rows": list(range(20))})

    return Starlette(routes=[Route("/report", report)])


def x402_seller(facilitator: str, network: str, price: Any, pay_to: str) -> Any:
    """``report_app()`` behind x402's ``PaymentMiddlewareASGI``, selling ``GET /report``
    through ``facilitator``."""
    from x402 import x402ResourceServer
    from x402.http import FacilitatorConfig, HTTPFacilitatorClient
    from x402.http.middleware.fastapi import PaymentMiddlewareASGI
    from x402.mechanisms.evm.exact import register_exact_evm_server

    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator)))
    register_exact_evm_server(server, network)
    accepts = {"scheme": "exact", "payTo": pay_to, "price": price, "network": network}
    app = report_app()
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    return app


@contextmanager
def script_server(
    command: list[str], probe_path: str, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python *command --port N`` on a free port, up once ``probe_path`` answers anything;
    yields (base URL, process)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, *command, "--port", str(port)]
    with serving(args, env or dict(os.environ), url + probe_path, log_path, any_status=True) as p:
        yield url, p


def fresh_database(name: str, postgres_url: str) -> contextlib.AbstractContextManager[str]:
    """``sqlite`` or ``postgresql``: a new database for one run (see the two below)."""
    return sqlite_database() if name == "sqlite" else postgres_database(postgres_url)


def fail(heading: str, lines: list[str]) -> NoReturn:
    """Print ``heading`` and ``lines`` under the table, and exit 1."""
    print("\n" + heading)
    for line in lines:
        print("  " + line)
    raise SystemExit(1)


def report_failures(examples: list[str], total: int, limit: int = 5) -> None:
    """Refuse to let a table with failed requests pass for a measurement."""
    if total:
        fail(
            f"{total} request(s) failed; the numbers above are not valid. First ones:",
            examples[:limit],
        )


def chosen_databases(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """``--databases`` as a list; ``parser.error`` for a name that is not one of the two."""
    databases = [d.strip() for d in args.databases.split(",") if d.strip()]
    unknown = set(databases) - {"sqlite", "postgresql"}
    if unknown or not databases:
        parser.error(f"--databases takes sqlite and/or postgresql, not {sorted(unknown)}")
    return databases


def versions_line(databases: list[str], postgres_url: str) -> str:
    """``Python 3.x, SQLite 3.y, PostgreSQL z``: what a table's header says it ran on."""
    versions = {"sqlite": f"SQLite {sqlite3.sqlite_version}"}
    if "postgresql" in databases:
        versions["postgresql"] = postgres_version(postgres_url)
    return f"Python {platform.python_version()}, " + ", ".join(versions[d] for d in databases)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (NaN of nothing)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    """Seconds as milliseconds for a table cell (``-`` for NaN)."""
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def ratio(a: float, b: float) -> str:
    """``a / b`` for a table cell (``-`` when either is NaN or ``b`` is zero)."""
    if math.isnan(a) or math.isnan(b) or not b:
        return "-"
    return f"{a / b:.2f}" if a / b < 100 else f"{a / b:.0f}"


def print_heading(header: list[str], above: str, columns: str) -> None:
    """A table's header lines, a blank line, its two heading rows and a rule under them."""
    for line in [*header, "", above, columns]:
        print(line)
    print("-" * len(columns))


def print_comparison(
    header: list[str],
    key: tuple[str, str],
    names: tuple[str, str],
    lines: list[tuple[str, Any, Sample, Sample]],
    *,
    errors: bool = False,
) -> None:
    """A table of ours beside theirs per (database, key): the p50 and p95 of each, their
    ratios and (``errors``) the two's failed requests."""
    label, align = key
    tail = " | {:>6}" if errors else ""
    columns = (
        f"{'database':<10} {label:{align}} | {'p50 ms':>7} {'p95 ms':>7} | {'p50 ms':>7}"
        f" {'p95 ms':>7} | {'p50':>5} {'p95':>5}" + tail.format("errors")
    )
    above = f"{'':<10} {'':{align}} | {names[0]:<15} | {names[1]:<15} | {'ratio':<11}"
    print_heading(header, above + (" |" if errors else ""), columns)
    for name, value, ours, theirs in lines:
        a = [ours.percentile(q) for q in (0.5, 0.95)]
        b = [theirs.percentile(q) for q in (0.5, 0.95)]
        print(
            f"{name:<10} {value:{align}} | {ms(a[0]):>7} {ms(a[1]):>7} | {ms(b[0]):>7}"
            f" {ms(b[1]):>7} | {ratio(a[0], b[0]):>5} {ratio(a[1], b[1]):>5}"
            + tail.format(ours.errors + theirs.errors)
        )
    print()


@attrs.define
class Sample:
    """One path's requests in one cell: the seconds each answered 200 took, and why each
    of the others failed."""

    latencies: list[float] = attrs.Factory(list)
    error_examples: list[str] = attrs.Factory(list)

    @property
    def errors(self) -> int:
        return len(self.error_examples)

    def percentile(self, q: float) -> float:
        return percentile(self.latencies, q)


async def closed_loop(
    calls: Sequence[Callable[[], Awaitable[httpx.Response]]], requests: int, sample: Sample
) -> None:
    """``requests`` requests shared by the clients (one ``call`` each), each sending its
    next as soon as the last is answered."""
    left = requests

    async def client_loop(call: Callable[[], Awaitable[httpx.Response]]) -> None:
        nonlocal left
        while left > 0:
            left -= 1
            began = time.perf_counter()
            try:
                r = await call()
                failure = None if r.status_code == 200 else f"{r.status_code} {r.text[:300]}"
            except httpx.HTTPError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            if failure is None:
                sample.latencies.append(time.perf_counter() - began)
            else:
                sample.error_examples.append(failure)

    await asyncio.gather(*(client_loop(call) for call in calls))


def report_cell_failures(results: dict[str, list[dict[str, Any]]], limit: int = 5) -> None:
    """``report_failures`` over every sample (``errors``, ``error_examples``) of every cell."""
    samples = [s for cells in results.values() for cell in cells for s in cell.values()]
    examples = [e for s in samples for e in s.error_examples]
    report_failures(examples, sum(s.errors for s in samples), limit)


def bench_parser(doc: str, quick: str, databases: str | None = None) -> argparse.ArgumentParser:
    """A bench's parser: its docstring's first paragraph, ``--json PATH`` and ``--quick``;
    with ``databases`` (their default), ``--databases`` and ``--postgres-url``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if databases is not None:
        parser.add_argument("--databases", default=databases)
        parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the figures here (bench JSON rows)"
    )
    parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def require_tools(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise SystemExit(f"this bench needs {tool} (Debian/Ubuntu: apt-get install {tool})")


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)

"""What the benches share: a free port, a fresh database per run (an SQLite file or a
PostgreSQL schema dropped afterwards), and stopping a server process politely."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import secrets
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

__all__ = [
    "DEFAULT_POSTGRES",
    "add_database_options",
    "chosen_databases",
    "free_port",
    "fresh_database",
    "ms",
    "percentile",
    "post_json",
    "postgres_database",
    "postgres_version",
    "print_heading",
    "process_cpu_seconds",
    "ratio",
    "reference_server",
    "report_failures",
    "serving",
    "sqlite_database",
    "stop_process",
    "versions_line",
    "wait_serving",
]


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
    import psycopg

    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0].split()[0] if row else '?'}"


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_serving(
    probe_url: str, process: subprocess.Popen[bytes], log_path: Path, *, any_status: bool = False
) -> None:
    """Wait until ``probe_url`` answers (200, or anything with ``any_status``); stop the
    bench with the process's log if it exits or is not up within 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"{probe_url}: process exited ({process.returncode}):\n{log_path.read_text()}"
            )
        try:
            if httpx.get(probe_url, timeout=2).status_code == 200 or any_status:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{probe_url} did not come up in 60 s:\n{log_path.read_text()}")


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
    probe_url: str,
    log_path: Path,
    *,
    any_status: bool = False,
) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess (output to ``log_path``) that answers ``probe_url``; stopped on exit."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(probe_url, process, log_path, any_status=any_status)
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


def fresh_database(name: str, postgres_url: str) -> contextlib.AbstractContextManager[str]:
    """``sqlite`` or ``postgresql``: a new database for one run (see the two below)."""
    return sqlite_database() if name == "sqlite" else postgres_database(postgres_url)


def report_failures(examples: list[str], total: int, limit: int = 5) -> None:
    """Refuse to let a table with failed requests pass for a measurement."""
    if not total:
        return
    print(f"\n{total} request(s) failed; the numbers above are not valid. First ones:")
    for example in examples[:limit]:
        print("  " + example)
    raise SystemExit(1)


def add_database_options(parser: argparse.ArgumentParser) -> None:
    """``--databases`` and ``--postgres-url``, the same in every bench with a database."""
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)


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

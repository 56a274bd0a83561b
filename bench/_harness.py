"""What the benches share: a free port, a fresh database per run (an SQLite file or a
PostgreSQL schema dropped afterwards), and stopping a server process politely."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

__all__ = [
    "free_port",
    "postgres_database",
    "postgres_version",
    "process_cpu_seconds",
    "sqlite_database",
    "stop_process",
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

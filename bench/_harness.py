"""What the benches share: a free port, a fresh database per run (an SQLite file or a
PostgreSQL schema dropped afterwards), and stopping a server process politely."""

from __future__ import annotations

import secrets
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

__all__ = ["free_port", "postgres_database", "postgres_version", "sqlite_database", "stop_process"]


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

"""A deployment on loopback as an operator runs one: ``svc-server migrate`` once, then
``svc-server run`` and ``svc-server worker`` processes on one database, a webhook receiver
that notices a delivery arriving twice at once, and what ``/proc`` says about a process
(its memory, its database connections, its sockets).

The processes are started as ``python -m reference_server``, which is ``svc-server``
without depending on where the console script was installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import httpx

from ..payouts.helpers import complete_onboarding
from ..support import PRODUCTION_KEYS, free_port

#: Given to every process alike, as a secret store would: no process generates its own.
KEYS = {
    "SVC_JWT_SECRET": PRODUCTION_KEYS["jwt_secret"],
    "SVC_DATA_KEY": PRODUCTION_KEYS["data_key"],
}


def svc_server(*args: str) -> list[str]:
    return [sys.executable, "-m", "reference_server", *args]


def migrate(database_url: str) -> None:
    """``svc-server migrate``: once, before any process starts (they do not migrate)."""
    done = subprocess.run(
        svc_server("migrate"),
        env={**os.environ, "SVC_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def ledger_audit(database_url: str) -> str:
    """``svc-server ledger audit``: exit 0 and "ledger is sound", or the problems."""
    done = subprocess.run(
        svc_server("ledger", "audit"),
        env={**os.environ, "SVC_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "ledger is sound" in done.stdout, done.stdout + done.stderr
    return done.stdout


@attrs.define
class Proc:
    """One ``svc-server`` process; ``url`` and ``port`` for a server, ``None`` for a worker."""

    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Ask it to stop (what an orchestrator sends) and wait; its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait(timeout=10)


def _spawn(args: list[str], env: Mapping[str, str], log: Path, port: int | None) -> Proc:
    with log.open("wb") as out:
        popen = subprocess.Popen(
            args,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Proc(popen=popen, log=log, port=port)


def start_server(env: Mapping[str, str], log: Path, port: int | None = None) -> Proc:
    """``svc-server run`` on a loopback port; returns once ``/ready`` answers 200."""
    port = port or free_port()
    proc = _spawn(svc_server("run", "--port", str(port)), env, log, port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"server exited {proc.popen.returncode}:\n{proc.output()}")
        try:
            if httpx.get(proc.url + "/ready", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.stop(signal.SIGKILL)
    raise RuntimeError(f"server did not become ready:\n{proc.output()}")


def start_worker(env: Mapping[str, str], log: Path) -> Proc:
    """``svc-server worker``; returns once it says it is running."""
    proc = _spawn(svc_server("worker"), env, log, None)
    deadline = time.monotonic() + 60
    while "outbox worker running" not in proc.output():
        if proc.popen.poll() is not None:
            raise RuntimeError(f"worker exited {proc.popen.returncode}:\n{proc.output()}")
        if time.monotonic() > deadline:
            proc.stop(signal.SIGKILL)
            raise RuntimeError(f"worker did not start:\n{proc.output()}")
        time.sleep(0.1)
    return proc


@contextmanager
def running(*procs: Proc) -> Iterator[None]:
    """Stop every process at the end, whatever happened."""
    try:
        yield
    finally:
        for proc in procs:
            proc.stop(signal.SIGTERM)  # what systemd, Docker and Kubernetes send


@attrs.define
class Receiver:
    """A webhook receiver on loopback.  It keeps every event id it was sent, and which
    ones arrived while a delivery of the same event was still being answered (a
    concurrent duplicate: the outbox's leases promise there is none).  ``fail_every``:
    the first delivery of every n-th event is answered 503, so retries happen too."""

    server: ThreadingHTTPServer
    fail_every: int = 0
    hold_seconds: float = 0.02
    received: Counter[str] = attrs.field(factory=Counter)
    overlapping: list[str] = attrs.field(factory=list)
    in_flight: set[str] = attrs.field(factory=set)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    @property
    def url(self) -> str:
        # ``localhost``: outside production, webhook URLs on loopback are allowed.
        return f"http://localhost:{self.server.server_address[1]}/hooks"

    def arrive(self, event_id: str) -> int:
        with self.lock:
            if event_id in self.in_flight:
                self.overlapping.append(event_id)
            self.in_flight.add(event_id)
            self.received[event_id] += 1
            first = self.received[event_id] == 1
            fail = self.fail_every and first and len(self.received) % self.fail_every == 0
        time.sleep(self.hold_seconds)  # answered a little later: overlaps would show
        with self.lock:
            self.in_flight.discard(event_id)
        return 503 if fail else 200

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_receiver(*, fail_every: int = 0) -> Receiver:
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = holder["r"].arrive(str(json.loads(body)["id"]))
            answer = b'{"received": true}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(server=server, fail_every=fail_every)
    holder["r"] = receiver
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver


# --- what /proc says about a process -----------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident memory (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _fd_targets(pid: int) -> list[str]:
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed while we looked
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return targets


def open_files(pid: int, path: Path) -> int:
    """Descriptors the process holds on ``path`` (an SQLite connection holds one on the
    database file)."""
    return sum(1 for target in _fd_targets(pid) if target == str(path))


#: TCP states of /proc/net/tcp: LISTEN, and CLOSE (a socket never connected).
_LISTEN, _CLOSE = "0A", "07"


@attrs.frozen
class Sockets:
    """A process's TCP sockets by what they are for."""

    inbound: int  # connections clients opened to its listening port
    database: int  # connections to PostgreSQL
    outbound: int  # every other connection it opened (webhooks, pay-url, Redis)


def tcp_sockets(pid: int, *, listen_port: int | None, database_port: int = 5432) -> Sockets:
    inodes = {t[len("socket:[") : -1] for t in _fd_targets(pid) if t.startswith("socket:[")}
    inbound = database = outbound = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if inode not in inodes or state in (_LISTEN, _CLOSE):
                continue
            if int(local.rsplit(":", 1)[1], 16) == listen_port:
                inbound += 1
            elif int(remote.rsplit(":", 1)[1], 16) == database_port:
                database += 1
            else:
                outbound += 1
    return Sockets(inbound=inbound, database=database, outbound=outbound)


def enable_payouts(onboard_at: str, sync_at: str, seller_key: str) -> None:
    """Onboard the seller through the sandbox Connect page (asked of ``onboard_at``) and
    sync it (through ``sync_at``: another server of the same deployment may answer)."""
    seller_auth = {"Authorization": f"Bearer {seller_key}"}
    r = httpx.post(
        onboard_at + "/sellers/me/connect/onboard",
        json={"country": "US", "type": "express"},
        headers=seller_auth,
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert complete_onboarding(r.json()["onboard_url"]).status_code == 200
    r = httpx.post(sync_at + "/sellers/me/connect/sync", headers=seller_auth, timeout=30)
    assert r.status_code == 200 and r.json()["payouts_enabled"] is True, r.text

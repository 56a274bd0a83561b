"""A running ``svc-server devchain``, as a developer starts it: a subprocess of
``python -m reference_server devchain --port P``, read until its ready line.  Skipped,
saying how to install it, only where anvil is not installed; ``.ci/run`` installs it."""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import attrs
import pytest

from reference_server.devchain.node import INSTALL_HINT, find_anvil
from reference_server.devchain.run import READY_LINE

from ..support import free_port

ROOT = Path(__file__).parents[2]
#: anvil is ready in under 3 s and the deployment takes a fraction of one.
_START_SECONDS = 30


@attrs.frozen
class RunningDevchain:
    process: subprocess.Popen[str]
    exports: dict[str, str]

    @property
    def facilitator_url(self) -> str:
        return self.exports["SVC_LIVE_FACILITATOR_URL"]

    @property
    def rpc_url(self) -> str:
        return self.exports["SVC_LIVE_RPC_URL"]

    @property
    def asset(self) -> str:
        return self.exports["SVC_LIVE_ASSET_ADDRESS"]

    @property
    def network(self) -> str:
        return f"eip155:{self.exports['SVC_LIVE_CHAIN_ID']}"


def _lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def start_devchain() -> RunningDevchain:
    """Start the command and wait for its ready line; its export lines, read as a shell
    reads them."""
    if find_anvil() is None:
        pytest.skip(f"anvil is not installed: {INSTALL_HINT}")
    process = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "devchain", "--port", str(free_port())],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    exports: dict[str, str] = {}
    try:
        while (line := lines.get(timeout=_START_SECONDS)) != READY_LINE:
            assert line is not None, f"devchain exited ({process.wait()}) before it was ready"
            export, assignment = shlex.split(line)
            assert export == "export"
            name, _, value = assignment.partition("=")
            exports[name] = value
    except BaseException:
        stop_devchain(process)
        raise
    return RunningDevchain(process, exports)


def stop_devchain(process: subprocess.Popen[str], signum: int = signal.SIGTERM) -> int:
    if process.poll() is None:
        process.send_signal(signum)
        try:
            return process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


@pytest.fixture(scope="session")
def devchain() -> Iterator[RunningDevchain]:
    running = start_devchain()
    yield running
    stop_devchain(running.process)

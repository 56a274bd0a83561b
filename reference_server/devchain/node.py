"""anvil, the EVM node: found where ``npm install @foundry-rs/anvil`` put it, run on
loopback, stopped with its process.

Install it once (npm is the only download; the binary comes in the package's optional
dependency for this platform)::

    npm install --prefix ~/.cache/svc-devchain @foundry-rs/anvil@1.7.1

``SVC_DEVCHAIN_NPM_PREFIX`` names another ``--prefix`` folder.  The platform binary is
run directly, never through ``npx``: a stopped ``npx`` leaves anvil running.  An
``anvil`` on ``PATH`` (foundryup's) is used when the npm one is missing.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = [
    "ANVIL_VERSION",
    "INSTALL_HINT",
    "AnvilMissing",
    "Node",
    "find_anvil",
    "free_port",
    "npm_prefix",
    "running_anvil",
]

ANVIL_VERSION = "1.7.1"
PREFIX_VARIABLE = "SVC_DEVCHAIN_NPM_PREFIX"
INSTALL_HINT = (
    f"npm install --prefix ~/.cache/svc-devchain @foundry-rs/anvil@{ANVIL_VERSION} "
    f"(or set {PREFIX_VARIABLE} to the --prefix folder it was installed in)"
)
#: How long anvil may take to answer its first request (it is ready in under 3 s).
_READY_SECONDS = 15.0

#: ``platform.system()``, ``platform.machine()`` → the npm package's platform suffix.
_PLATFORMS = {
    ("Linux", "x86_64"): "linux-amd64",
    ("Linux", "aarch64"): "linux-arm64",
    ("Darwin", "x86_64"): "darwin-amd64",
    ("Darwin", "arm64"): "darwin-arm64",
}


class AnvilMissing(RuntimeError):
    """No anvil binary where the install puts it, nor on ``PATH``."""


def npm_prefix() -> Path:
    """The folder ``npm install --prefix`` installed anvil into."""
    configured = os.environ.get(PREFIX_VARIABLE)
    return Path(configured).expanduser() if configured else Path.home() / ".cache/svc-devchain"


def find_anvil() -> Path | None:
    """The anvil binary to run, or None when it is not installed."""
    suffix = _PLATFORMS.get((platform.system(), platform.machine()))
    if suffix is not None:
        binary = npm_prefix() / "node_modules/@foundry-rs" / f"anvil-{suffix}" / "bin/anvil"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    on_path = shutil.which("anvil")
    return Path(on_path) if on_path else None


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when the process that started anvil
    dies, even by SIGKILL, which no ``finally`` survives; so no anvil outlives its run."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Node:
    """A running anvil: its JSON-RPC URL and its process."""

    def __init__(self, process: subprocess.Popen[bytes], rpc_url: str) -> None:
        self.process = process
        self.rpc_url = rpc_url

    def wait_until_ready(self) -> None:
        """Until anvil answers ``eth_chainId``; refuse if it exits or never answers."""
        deadline = time.monotonic() + _READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"anvil exited with status {self.process.returncode}")
            try:
                answer = httpx.post(
                    self.rpc_url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
                    timeout=1.0,
                )
                if answer.status_code == 200 and "result" in answer.json():
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"anvil did not answer at {self.rpc_url} in {_READY_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def running_anvil(port: int | None = None) -> Iterator[Node]:
    """anvil on 127.0.0.1 (only), answering, for the block; stopped after, whatever
    happens.  Chain id 31337, the standard test mnemonic's ten funded accounts.  Start it
    from a thread that lives as long as the block: on Linux anvil is stopped when the
    thread that started it ends (``PR_SET_PDEATHSIG``)."""
    binary = find_anvil()
    if binary is None:
        raise AnvilMissing(f"anvil is not installed: {INSTALL_HINT}")
    port = port or free_port()
    process = subprocess.Popen(  # noqa: S603 -- the installed binary, fixed arguments
        [str(binary), "--host", "127.0.0.1", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
    )
    node = Node(process, f"http://127.0.0.1:{port}")
    try:
        node.wait_until_ready()
        yield node
    finally:
        node.stop()

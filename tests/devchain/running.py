"""A running ``svc-server devchain``, as a developer starts it: a subprocess of
``python -m reference_server devchain --port P``, read until its ready line.  Skipped,
saying how to install it, only where anvil is not installed; ``.ci/run`` installs it.

One per test run (the ``devchain`` fixture, in ``tests/conftest.py``): every live test on
the real chain shares its node, token and facilitator.  Tests that need money of their own
mint it to a fresh account (:meth:`RunningDevchain.new_payer`), so none depends on another's
balances; the facilitator pays the gas, so payers need no ether.
"""

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
from typing import IO, TYPE_CHECKING, Any

import attrs
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from reference_server.devchain import artefact
from reference_server.devchain.chain import mnemonic_key
from reference_server.devchain.node import INSTALL_HINT, find_anvil
from reference_server.devchain.run import READY_LINE

from ..support import free_port

if TYPE_CHECKING:
    from web3 import Web3
    from web3.contract import Contract

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

    @property
    def chain_id(self) -> int:
        return int(self.exports["SVC_LIVE_CHAIN_ID"])

    @property
    def deposit_address(self) -> str:
        return self.exports["SVC_LIVE_DEPOSIT_ADDRESS"]

    @property
    def hot_wallet(self) -> LocalAccount:
        return Account.from_key(self.exports["SVC_LIVE_HOT_WALLET_KEY"])

    def live_settings(self) -> dict[str, Any]:
        """The ``Settings`` fields its export lines set, as a server would read them."""
        return {
            name.removeprefix("SVC_").lower(): value
            for name, value in self.exports.items()
            if name.startswith("SVC_LIVE_")
        }

    def web3(self) -> Web3:
        from web3 import Web3

        return Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 10}))

    def token(self) -> Contract:
        return self.web3().eth.contract(address=self.asset, abi=artefact.load()["abi"])

    def balance(self, address: str) -> int:
        """``balanceOf(address)`` on chain, in the token's atomic units (micros)."""
        return int(self.token().functions.balanceOf(address).call())

    def mint(self, address: str, micros: int) -> None:
        """New tokens to ``address``, from the deployer (anvil's unlocked account 0, the
        token's minter)."""
        w3 = self.web3()
        minter = Account.from_key(mnemonic_key(0)).address
        sent = self.token().functions.mint(address, micros).transact({"from": minter})
        assert w3.eth.wait_for_transaction_receipt(sent, timeout=30)["status"] == 1

    def new_payer(self, micros: int = 1_000_000) -> LocalAccount:
        """A fresh account holding ``micros`` of the token (1 USDC unless told)."""
        payer: LocalAccount = Account.create()
        if micros:
            self.mint(payer.address, micros)
        return payer


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


def running_devchain() -> Iterator[RunningDevchain]:
    """The ``devchain`` fixture's body: started on first use, stopped at the run's end."""
    running = start_devchain()
    yield running
    stop_devchain(running.process)

"""``svc-server devchain`` end to end: anvil up, the token deployed and minted, Permit2
and x402's upto proxy placed, the official x402 facilitator served, the ``export`` lines
printed; all stopped on Ctrl-C or SIGTERM (anvil too: it is this process's child, stopped
in a ``finally``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn

from .chain import Devchain, deploy
from .facilitator import facilitator_app
from .node import Node, running_anvil

__all__ = ["READY_LINE", "serve_devchain"]

#: The last line on stdout, once everything answers: a script waits for it.
READY_LINE = "# devchain ready; Ctrl-C stops it"


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run like Ctrl-C.  uvicorn stops on either, then raises the signal
    again for its caller; by default SIGTERM would then kill this process before its
    ``finally`` stops anvil, leaving the node running."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _announce(
    server: uvicorn.Server, node: Node, chain: Devchain, url: str, say: Callable[[str], None]
) -> None:
    """Once the facilitator listens: the export lines, then the ready line; then watch the
    node, and stop the facilitator if it dies (a facilitator without its chain only fails)."""
    while not server.started:
        if server.should_exit:
            return
        threading.Event().wait(0.02)
    for line in chain.exports(url):
        say(line)
    say(READY_LINE)
    node.process.wait()
    server.should_exit = True


def serve_devchain(port: int, say: Callable[[str], None], tell: Callable[[str], None]) -> None:
    """Run until stopped; ``say`` prints to stdout (the exports), ``tell`` to stderr."""
    if threading.current_thread() is threading.main_thread():
        _stop_on_sigterm()
    with running_anvil() as node:
        tell(f"anvil: {node.rpc_url} (chain 31337, loopback only)")
        chain = deploy(node.rpc_url)
        tell(f"token: {chain.asset_name} at {chain.asset_address}, 6 decimals")
        tell("Permit2 and x402's upto proxy at their canonical addresses; payers approved Permit2")
        url = f"http://127.0.0.1:{port}"
        tell(f"x402 facilitator: {url} (/verify, /settle, /supported)")
        app = facilitator_app(chain.facilitator_key, node.rpc_url, chain.network)
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        )
        watcher = threading.Thread(
            target=_announce, args=(server, node, chain, url, say), daemon=True
        )
        watcher.start()
        server.run()

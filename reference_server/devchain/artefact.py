"""The devchain contracts' committed ABIs and bytecode (``<name>.json`` beside each
``<name>.vy``, written by :mod:`.build`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["CONTRACTS", "VYPER_VERSION", "load", "path", "source"]

HERE = Path(__file__).parent
#: The compiler the artefacts were built with: the ``devchain`` extra pins the same one.
VYPER_VERSION = "0.4.3"
#: Each contract and the bytecode the devchain needs of it: the token is deployed (its
#: constructor sets its name and version), while Permit2 and x402's upto proxy are placed
#: at their canonical addresses with ``anvil_setCode``, which takes runtime code.
CONTRACTS: dict[str, str] = {
    "token": "bytecode",
    "permit2": "bytecode_runtime",
    "upto_proxy": "bytecode_runtime",
}


def source(name: str) -> Path:
    return HERE / f"{name}.vy"


def path(name: str) -> Path:
    return HERE / f"{name}.json"


def load(name: str = "token") -> dict[str, Any]:
    """``{"compiler", "abi", <its bytecode kind>}`` as committed."""
    artefact: dict[str, Any] = json.loads(path(name).read_text())
    return artefact

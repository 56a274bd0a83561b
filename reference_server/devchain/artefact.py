"""The token's committed ABI and bytecode (``token.json``, written by :mod:`.build`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["ARTEFACT", "SOURCE", "VYPER_VERSION", "load"]

HERE = Path(__file__).parent
SOURCE = HERE / "token.vy"
ARTEFACT = HERE / "token.json"
#: The compiler ``token.json`` was built with: the ``devchain`` extra pins the same one.
VYPER_VERSION = "0.4.3"


def load() -> dict[str, Any]:
    """``{"compiler", "abi", "bytecode"}`` as committed."""
    artefact: dict[str, Any] = json.loads(ARTEFACT.read_text())
    return artefact

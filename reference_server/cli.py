"""``svc-server``, the entry point: the commands (:mod:`reference_server.commands`) when the
server extra is installed, else one line saying how to install it -- never a traceback.

``svc`` alone (the SDK: httpx, anyio, attrs, cattrs) has none of the server's
dependencies, and ``import reference_server`` imports none of them until asked (see the
package's ``__getattr__``), so this module imports on any install.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["main"]

#: The kit's own packages: a module of theirs missing is a bug, not a missing extra.
_OURS = ("reference_server", "svc", "svc_asgi")

main: Any


def missing_extra(exc: ModuleNotFoundError) -> bool:
    """Is ``exc`` a dependency of the server extra that is not installed?"""
    return (exc.name or "").split(".")[0] not in _OURS


def _needs_the_server_extra(exc: ModuleNotFoundError) -> Any:
    def main() -> None:
        sys.exit(
            f"svc-server needs the server extra ({exc.name} is not installed): "
            "pip install 'svc-payments[server]'"
        )

    return main


try:
    from .commands import main
except ModuleNotFoundError as missing:
    if not missing_extra(missing):
        raise
    main = _needs_the_server_extra(missing)

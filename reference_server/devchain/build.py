"""Compile the devchain's contracts with the pinned Vyper from PyPI into their artefacts::

    python -m reference_server.devchain.build           # rewrite the .json artefacts
    python -m reference_server.devchain.build --check   # exit 1 if any differs

The committed artefacts are what ``svc-server devchain`` deploys, so a run needs no
compiler; ``--check`` (run by CI) proves each is what its committed source compiles to,
byte for byte.
"""

from __future__ import annotations

import json
import sys

from ..generated import checking, refresh
from . import artefact
from .artefact import CONTRACTS, VYPER_VERSION

__all__ = ["compile_contract", "main", "render"]


def compile_contract(name: str) -> dict[str, object]:
    """The ABI and the bytecode the devchain needs of ``<name>.vy``, by the pinned
    compiler only: another version would write different bytes, and the check would then
    prove nothing."""
    import vyper
    from vyper import compile_code

    if vyper.__version__ != VYPER_VERSION:
        raise SystemExit(
            f"vyper {VYPER_VERSION} is needed (found {vyper.__version__}): "
            f"pip install 'svc-payments[devchain]'"
        )
    kind = CONTRACTS[name]
    output = compile_code(artefact.source(name).read_text(), output_formats=["abi", kind])
    return {"compiler": f"vyper {VYPER_VERSION}", "abi": output["abi"], kind: output[kind]}


def render(compiled: dict[str, object]) -> str:
    return json.dumps(compiled, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    check = checking(argv)
    stale = []
    for name in CONTRACTS:
        target, source = artefact.path(name), artefact.source(name)
        expected = render(compile_contract(name))
        if not refresh(target, expected, check=check, name=target.name, source=source.name):
            stale.append((target, source))
    if not check:
        return 0
    for target, source in stale:
        print(
            f"out of date: {target} is not what {source.name} compiles to; "
            "run `python -m reference_server.devchain.build`"
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""Compile the devchain's token with the pinned Vyper from PyPI into ``token.json``::

    python -m reference_server.devchain.build           # rewrite token.json
    python -m reference_server.devchain.build --check   # exit 1 if it differs

The committed artefact is what ``svc-server devchain`` deploys, so a run needs no
compiler; ``--check`` (run by CI) proves the artefact is what the committed source
compiles to, byte for byte.
"""

from __future__ import annotations

import json
import sys

from ..generated import checking, refresh
from .artefact import ARTEFACT, SOURCE, VYPER_VERSION

__all__ = ["compile_token", "main", "render"]


def compile_token() -> dict[str, object]:
    """The ABI and deployment bytecode of ``token.vy``, by the pinned compiler only: another
    version would write different bytes, and the check would then prove nothing."""
    import vyper
    from vyper import compile_code

    if vyper.__version__ != VYPER_VERSION:
        raise SystemExit(
            f"vyper {VYPER_VERSION} is needed (found {vyper.__version__}): "
            f"pip install 'svc-payments[devchain]'"
        )
    output = compile_code(SOURCE.read_text(), output_formats=["abi", "bytecode"])
    return {
        "compiler": f"vyper {VYPER_VERSION}",
        "abi": output["abi"],
        "bytecode": output["bytecode"],
    }


def render(artefact: dict[str, object]) -> str:
    return json.dumps(artefact, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    check = checking(argv)
    expected = render(compile_token())
    if refresh(ARTEFACT, expected, check=check, name=ARTEFACT.name, source=SOURCE.name):
        return 0
    if not check:
        return 0
    print(
        f"out of date: {ARTEFACT} is not what {SOURCE.name} compiles to; "
        "run `python -m reference_server.devchain.build`"
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())

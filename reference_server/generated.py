"""Files generated from the code and committed (the API reference, the devchain token's
artefact, the SDK's blocking twins): each generator writes its file, or with
``--check`` (run by CI) prints how it differs and writes nothing."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["checking", "refresh"]


def checking(argv: Sequence[str] | None) -> bool:
    """Whether a generator's command line (``sys.argv`` when ``None``) asks ``--check``."""
    return "--check" in (sys.argv[1:] if argv is None else argv)


def refresh(target: Path, expected: str, *, check: bool, name: str, source: str = "") -> bool:
    """Whether ``target`` held ``expected``.  When it did not: with ``check``, print the
    difference (``name`` labels it, ``source`` says what it is generated from) and leave
    the file alone; without, write it and say so."""
    current = target.read_text() if target.exists() else ""
    if current == expected:
        return True
    if check:
        generated = f"{name} (generated from {source})" if source else f"{name} (generated)"
        sys.stdout.writelines(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                f"{name} (on disk)",
                generated,
            )
        )
    else:
        target.write_text(expected)
        print(f"wrote {name}" + (f" from {source}" if source else ""))
    return False

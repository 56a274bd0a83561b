"""Files generated from the code and committed (the API reference, the devchain token's
artefact, the SDK's blocking twins): each generator writes its file, or with
``--check`` (run by CI) prints how it differs and writes nothing."""

from __future__ import annotations

import difflib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ROOT", "checking", "formatted", "refresh"]

#: The repository root: ``ruff`` runs there, so it reads the project's configuration.
ROOT = Path(__file__).resolve().parents[1]


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


def formatted(text: str, filename: str) -> str:
    """Generated Python as the project writes it: imports sorted, the unused ones dropped
    (``ruff check --fix`` for I and F401), then ``ruff format``; ``filename`` is the file
    it goes to, for the configuration that applies there."""
    text = _ruff(["check", "--fix-only", "--exit-zero", "--select", "I,F401"], text, filename)
    return _ruff(["format"], text, filename)


def _ruff(args: list[str], text: str, filename: str) -> str:
    done = subprocess.run(  # noqa: S603 (this interpreter's ruff, fixed arguments)
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", filename, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruff {' '.join(args)} failed on {filename}:\n{done.stderr}")
    return done.stdout

"""No ``assert`` in library code: ``python -O`` strips it, and a check that vanishes is a
check that never held.  Library code raises instead (``reference_server.invariant``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("svc", "svc_asgi", "reference_server")


def _asserts() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_library_code_has_no_assert() -> None:
    found = _asserts()
    assert found == {}, f"assert does control flow (gone under python -O) in {found}"

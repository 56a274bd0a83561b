"""README says what a newcomer gets and where the keys come from."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_svc_row_names_every_core_dependency() -> None:
    """``pip install svc-payments`` brings exactly pyproject's core dependencies; README's table
    names each of them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=\[; ]", dep, maxsplit=1)[0] for dep in project["dependencies"]]
    [row] = [line for line in README.splitlines() if line.startswith("| `svc` |")]
    missing = [name for name in names if name not in row]
    assert not missing, f"README's svc row omits {missing}: {row}"


def test_five_lines_say_where_the_keys_come_from() -> None:
    five = README.split("## Five lines", 1)[1].split("```", 1)[0]
    assert "run --demo" in five and "401" in five
    assert "export" in README.split("## Five lines", 1)[0]

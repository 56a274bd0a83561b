"""The distribution a newcomer installs is this one: ``svc-payments``.

``pip install svc`` installs an unrelated 2014 project ("Spreadsheet Viewer and
Converter"), so every install line, extra and install hint names ``svc-payments`` (the
import names stay ``svc``, ``svc_asgi`` and ``reference_server``).
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import svc

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "svc-payments"

#: The wrong distribution where a reader or pip meets it: an extra of ``svc``
#: (``svc[cli]``, in an install line or pyproject's self-reference), ``pip install svc``,
#: or code reading the metadata of ``svc``.
_WRONG = re.compile(
    "|".join(
        (
            r"(?<![\w.-])svc" + r"\[[a-z]",
            r"pip install\s+(?:-\S+\s+)*['\"]?svc" + r"(?![\w-])",
            r"(?:version|metadata|distribution)\(\s*['\"]svc" + r"['\"]",
        )
    )
)


#: Where install lines live: the repository's own text, not its caches or virtualenvs.
_PLACES = ("README.md", "pyproject.toml", ".ci", "docs", "svc", "svc_asgi", "reference_server")
_PLACES += ("tests", "bench")
_TEXT = {".md", ".py", ".toml", ".html", ".yaml", ".json", ".txt", ".cfg", ""}


def _text_files() -> list[Path]:
    files = []
    for place in (ROOT / name for name in _PLACES):
        for path in [place] if place.is_file() else place.rglob("*"):
            if path.is_file() and path.suffix in _TEXT and "__pycache__" not in path.parts:
                files.append(path)
    # This file names the wrong forms on purpose (and checks the pattern sees them).
    files.remove(Path(__file__).resolve())
    return files


def test_no_install_line_names_the_wrong_distribution() -> None:
    """README, docs, code, pyproject and CI: each says ``svc-payments``."""
    wrong = []
    files = _text_files()
    assert ROOT / ".ci" / "run" in files and ROOT / "README.md" in files
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _WRONG.search(line):
                wrong.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not wrong, "\n".join(wrong)


def test_the_pattern_finds_what_it_is_for() -> None:
    """The check above would see each wrong form (and not the right ones)."""
    wrong = "pip install 'svc" + "[server]'", "pip install svc" + "\n", 'version("svc' + '")'
    right = "pip install 'svc-payments[server]'", "pip install svc-payments", "pip install svcx"
    assert all(_WRONG.search(line) for line in wrong)
    assert not any(_WRONG.search(line) for line in right)


def test_pyproject_names_the_distribution() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert project["version"] == svc.__version__


def test_the_installed_distribution_is_svc_payments() -> None:
    """What ``pip install -e '.[dev]'`` installed: its metadata is named ``svc-payments``
    at this version, and it provides the ``svc`` import package."""
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Version"] == svc.__version__
    assert DISTRIBUTION in importlib.metadata.packages_distributions()["svc"]

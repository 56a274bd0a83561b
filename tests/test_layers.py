"""Arrows one way: the domain never imports the HTTP layer.

The HTTP layer is ``reference_server.web`` (the framework) and ``reference_server.routes``
(the API) on Starlette; every other package of ``reference_server`` -- found on disk, so a
new one is checked from the day it appears -- is below it and refuses with
``reference_server.domain.errors.DomainError``, which ``web.errors.http_error`` maps to
HTTP in one place.  This reads every module's imports (absolute and relative) with
``ast``, and every raise site's literal code, without importing anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from reference_server.web.errors import CODES

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "reference_server"
#: The HTTP layer's packages: the only ones that may speak HTTP.
HTTP_LAYER = ("web", "routes")
#: Programs of their own beside the server, serving their own small HTTP app (``devchain``:
#: the official x402 facilitator over a local chain); the server never imports them (below).
OWN_PROGRAMS = ("devchain",)
#: What no module below the HTTP layer may import.
FORBIDDEN = ("reference_server.web", "reference_server.routes", "reference_server.app", "starlette")
#: The domain's error types; the HTTP layer's ``ApiError`` is forbidden with its package.
DOMAIN_ERRORS = ("DomainError", "PaymentRefused")


def _module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` (a package's is its ``__init__``'s)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _from_module(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The absolute module a ``from ... import`` in module ``name`` (at ``path``) names."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _below_http() -> dict[str, Path]:
    """Every module of every ``reference_server`` subpackage but the HTTP layer's."""
    modules: dict[str, Path] = {}
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        if init.parent.name not in HTTP_LAYER + OWN_PROGRAMS:
            modules.update((_module_name(path), path) for path in sorted(init.parent.rglob("*.py")))
    return modules


MODULES = _below_http()


def _imports(name: str, path: Path) -> set[str]:
    """The absolute names ``name`` imports (``from . import x`` counts as ``pkg.x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, name, path)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _forbidden(imported: str) -> bool:
    return any(imported == f or imported.startswith(f + ".") for f in FORBIDDEN)


def test_the_scan_sees_the_domain_packages() -> None:
    packages = {name.split(".")[1] for name in MODULES}
    assert {"domain", "sandbox", "store", "outbox", "outbound"} <= packages
    assert "reference_server.domain.open_rails" in MODULES  # nested packages too
    assert "reference_server.domain.paid_fetch.flow" in MODULES


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_domain_module_imports_the_http_layer(name: str) -> None:
    bad = sorted(i for i in _imports(name, MODULES[name]) if _forbidden(i))
    assert bad == [], f"{name} imports the HTTP layer: {bad}"


def test_the_server_never_imports_a_program_of_its_own() -> None:
    """Only ``svc-server``'s command imports ``devchain`` (lazily: web3 and vyper are
    the devchain extra's), so a server install never needs them."""
    programs = tuple(f"reference_server.{name}" for name in OWN_PROGRAMS)
    importers = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if name.startswith(programs):
            continue
        if any(i == p or i.startswith(p + ".") for i in _imports(name, path) for p in programs):
            importers.add(name)
    assert importers == {"reference_server.commands"}


def _raise_sites() -> list[tuple[str, int, str, str]]:
    """``(module, line, error type, code)`` for every domain error built with a literal
    code below the HTTP layer."""
    sites = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            code = node.args[0]
            if kind in DOMAIN_ERRORS and isinstance(code, ast.Constant):
                sites.append((name, node.lineno, str(kind), str(code.value)))
    return sites


def test_domain_error_codes_are_documented_and_refusals_are_402() -> None:
    """Each literal code is in ``CODES`` (so it maps to a status and is in docs/errors.md),
    and ``PaymentRefused`` -- the kind ``POST /pay`` and pay-url record ``payment.failed``
    for -- is used exactly for the 402 codes."""
    sites = _raise_sites()
    assert len(sites) >= 20, sites  # the scan finds the raise sites
    undocumented = [s for s in sites if s[3] not in CODES]
    assert undocumented == []
    misfiled = [s for s in sites if (s[2] == "PaymentRefused") != (CODES[s[3]][0] == 402)]
    assert misfiled == [], "402 codes are PaymentRefused, and only they"


def _private_to_svc(name: str) -> bool:
    """``svc._money`` or ``svc._spec.Role``: behind ``svc``'s underscore; ``svc.__version__``
    and ``svc.money`` are not."""
    return re.match(r"svc\._(?!_)", name) is not None


@pytest.mark.parametrize("package", ["reference_server", "svc_asgi"])
def test_the_sdk_is_used_through_its_public_surface(package: str) -> None:
    """``svc``'s private modules may change at any release; the gate and the server use
    what ``svc`` publishes (``svc``, ``svc.money``, ``svc.wire``, ``svc.webhooks``), found by
    reading every module's imports."""
    private = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(_private_to_svc(name) for name in names):
                private.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert private == [], private


# --- no import circles ----------------------------------------------------------------------

PACKAGES = ("svc", "svc_asgi", "reference_server")


def _all_modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name, found on disk."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            modules[_module_name(path)] = path
    return modules


def _type_checking(test: ast.expr) -> bool:
    """An ``if``'s test that is ``TYPE_CHECKING`` (bare or as ``typing.TYPE_CHECKING``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports when it runs: at the top or inside a
    function (a deferred import is still a dependency), not under ``if TYPE_CHECKING:``.
    ``from pkg import sub`` depends on ``pkg.sub`` only: a package's ``__init__`` runs
    before any of its modules anyway."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, name, path)
            submodules = {f"{module}.{alias.name}" for alias in node.names} & modules.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(module)
        pending.extend(ast.iter_child_nodes(node))
    return {imported for imported in found if imported in modules and imported != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each set of modules that reach one another
    through their imports."""

    def reached(start: str) -> set[str]:
        seen: set[str] = set()
        pending = list(graph[start])
        while pending:
            name = pending.pop()
            if name not in seen:
                seen.add(name)
                pending.extend(graph[name])
        return seen

    reach = {name: reached(name) for name in graph}
    circles = {
        frozenset({name} | {other for other in reach[name] if name in reach[other]})
        for name in graph
        if name in reach[name]
    }
    return sorted(sorted(circle) for circle in circles)


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"d", "f"}, "f": {"e"}}
    assert _circles(graph) == [["a", "b", "c"], ["e", "f"]]


def test_no_import_circles() -> None:
    """No module of svc, svc_asgi or reference_server imports, at run time, a module that
    imports it back, however far round: each depends on what is below it only."""
    modules = _all_modules()
    assert {"svc", "svc_asgi._core", "reference_server.settings"} <= modules.keys()
    graph = {name: _runtime_imports(name, path, modules) for name, path in modules.items()}
    assert graph["svc_asgi._core"], "the scan reads imports"
    assert _circles(graph) == []

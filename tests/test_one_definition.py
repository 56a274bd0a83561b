"""Rules written once in library code: the recursion-limit guard, the request-id
generator and the roles.  Two copies of a rule drift; these tests find a second one."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import svc._spec
import svc_asgi
from reference_server.recursion import keeping_recursion_limit
from reference_server.web import auth, request_id

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("svc", "svc_asgi", "reference_server")


def _library_sources() -> dict[str, str]:
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _calls(source: str, name: str) -> int:
    tree = ast.parse(source)
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
    )


def test_one_recursion_limit_guard() -> None:
    sources = _library_sources()
    sources["tests/conftest.py"] = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    setting = {path for path, text in sources.items() if _calls(text, "setrecursionlimit")}
    assert setting == {"reference_server/recursion.py"}


def test_the_guard_puts_the_limit_back() -> None:
    """In a fresh interpreter: the first import of eth-account, inside the guard, leaves the
    limit as it was."""
    check = (
        "import sys\n"
        "from reference_server.recursion import keeping_recursion_limit\n"
        "limit = sys.getrecursionlimit()\n"
        "with keeping_recursion_limit():\n"
        "    import eth_account\n"
        "assert 'py_ecc' in sys.modules\n"
        "assert sys.getrecursionlimit() == limit, sys.getrecursionlimit()\n"
    )
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)


def test_a_guard_never_undoes_a_change_made_while_it_was_open() -> None:
    """Server threads open the guard at every signing.  One that outlived a change of the
    limit made meanwhile (a test framework putting back a limit it had raised) used to
    restore what it read on entry, leaving the raised limit for good: deep JSON then
    overflowed the C stack and killed the test process."""
    assert "py_ecc" in sys.modules  # imported by tests/conftest.py, inside the guard
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(limit + 1000)  # raised for a while by someone else...
        with keeping_recursion_limit():
            sys.setrecursionlimit(limit)  # ...and put back while the guard is open
        assert sys.getrecursionlimit() == limit
    finally:
        sys.setrecursionlimit(limit)


def test_one_request_id_generator() -> None:
    minting = re.compile(r"""["']req_["']\s*\+|f["']req_\{""")
    found = {path for path, text in _library_sources().items() if minting.search(text)}
    assert found == {"svc_asgi/_asgi.py"}
    assert request_id.new_request_id is svc_asgi.new_request_id
    assert re.fullmatch(r"req_[0-9a-f]{24}", svc_asgi.new_request_id())


def test_one_role_type_for_the_sdk_and_the_server() -> None:
    assert auth.Role is svc._spec.Role
    assert [role.value for role in auth.Role] == ["owner", "seller", "wallet"]
    assert auth.Role.SELLER == "seller" and auth.Role("wallet") is auth.Role.WALLET
    assert {role.credential_hint for role in auth.Role} == {
        "an owner JWT",
        "a seller key (svc_sk_*)",
        "a wallet key (svc_vw_*)",
    }

"""The quickstarts and the go-live guide run as written.

Every fenced block of those pages whose info string carries the word ``run`` (```` ```python
run ````, ```` ```sh run ````) is executed, in page order, against a live reference server on
loopback -- the blocks are read from the files, so a new block runs without editing this
test.  The page is followed the way a reader at one terminal would follow it:

- the reader's environment starts with ``SVC_BASE_URL`` (the server under test) and
  ``SVC_ENVIRONMENT=test``, the two variables the pages ask the reader to set; every
  credential (``SVC_OWNER_JWT``, ``SVC_SELLER_KEY``, ``SVC_WALLET_KEY``) is made by the
  page's own steps;
- Python blocks share one namespace per page, so later blocks use earlier variables, and
  see the environment as ``os.environ``;
- shell blocks run in ``bash -e -o pipefail`` with that environment, and what they
  ``export`` stays set for the blocks after them (Python ones included), as in one shell.

Blocks without ``run`` are illustrative (placeholders such as ``svc_sk_live_...``, or
steps only a person can do) and are only shown.
"""

from __future__ import annotations

import os
import re
import shutil
import socketserver
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import uvicorn

import svc

from ..support import LiveServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "quickstart-seller.md",
    "quickstart-agent.md",
    "quickstart-backend.md",
    "quickstart-operator.md",
    "go-live.md",
]
FENCE = re.compile(r"^```([\w-]+)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SHELLS = {"sh", "bash", "shell"}
#: What the pages' shell steps use besides the kit's own commands.
SHELL_TOOLS = ("bash", "curl", "jq")


@attrs.frozen
class Block:
    language: str
    code: str
    line: int

    @property
    def python(self) -> bool:
        return self.language == "python"


def runnable_blocks(text: str) -> list[Block]:
    """The page's fenced blocks whose info string has the word ``run``, in order."""
    blocks = []
    for m in FENCE.finditer(text):
        language, info, code = m.group(1), m.group(2).split(), m.group(3)
        if "run" not in info:
            continue
        if language != "python" and language not in SHELLS:
            raise AssertionError(f"a `run` block must be python or sh, not {language!r}")
        blocks.append(Block(language, code, text.count("\n", 0, m.start()) + 1))
    return blocks


def test_blocks_are_found() -> None:
    blocks = runnable_blocks(
        "x\n```python run\na = 1\n```\n```sh\nnot run\n```\n```sh run\necho $A\n```\n"
    )
    assert [(b.language, b.code, b.line) for b in blocks] == [
        ("python", "a = 1\n", 2),
        ("sh", "echo $A\n", 8),
    ]


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES)
def test_page_links_resolve(page: str) -> None:
    """Every relative link of the page names a file that exists, and a heading in it."""
    path = ROOT / "docs" / page
    broken = []
    for target in LINK.findall(FENCE.sub("", path.read_text())):
        if "://" in target:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"docs/{page}: broken links {broken}"


def _run_shell(block: Block, env: dict[str, str], cwd: Path, where: str) -> dict[str, str]:
    """One shell block; answers the environment it leaves behind."""
    dump = cwd / ".env-after"
    script = f'{block.code}\nenv -0 > "{dump}"\n'
    bash = shutil.which("bash")
    assert bash is not None, "the shell blocks need bash"
    done = subprocess.run(
        [bash, "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )
    print(f"--- {where}\n{done.stdout}", end="")  # shown by pytest -s, or on failure
    print(done.stderr, end="", file=sys.stderr)
    if done.returncode != 0:
        pytest.fail(
            f"{where} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n"
            f"{done.stderr}",
            pytrace=False,
        )
    after = dict(item.split("=", 1) for item in dump.read_text().split("\0") if "=" in item)
    dump.unlink()
    return after


def _run_python(
    block: Block, namespace: dict[str, object], env: dict[str, str], page: Path
) -> dict[str, str]:
    """One Python block in the page's namespace, with ``env`` as ``os.environ``.  Compiled
    as the page, at the block's own lines, so a traceback points into the Markdown."""
    code = "\n" * block.line + block.code
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        exec(compile(code, str(page), "exec"), namespace)  # noqa: S102 - the page's own code
        return dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("page", PAGES)
def test_page_runs(
    page: str, server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = ROOT / "docs" / page
    blocks = runnable_blocks(path.read_text())
    assert blocks, f"docs/{page} has no `run` block"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    env |= {
        "SVC_BASE_URL": server.url,
        "SVC_ENVIRONMENT": "test",
        # the `svc` command of this checkout, and the Python that runs this test first
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    }
    missing = [t for t in SHELL_TOOLS if shutil.which(t) is None]
    if missing and not all(b.python for b in blocks):
        pytest.skip(f"the shell steps of docs/{page} need {', '.join(missing)}: apt-get install")
    namespace: dict[str, Any] = {"__name__": f"docs.{page}"}
    monkeypatch.chdir(tmp_path)  # files a page writes land here
    try:
        for block in blocks:
            where = f"docs/{page}:{block.line}"
            if block.python:
                env = _run_python(block, namespace, env, path)
            else:
                env = _run_shell(block, env, tmp_path, where)
    finally:
        _clean_up(namespace)


def _clean_up(namespace: dict[str, Any]) -> None:
    """Stop what a page left running (webhook receivers, clients) once it is done."""
    for value in namespace.values():
        if isinstance(value, socketserver.BaseServer):
            value.shutdown()
            value.server_close()
        elif isinstance(value, uvicorn.Server):
            value.should_exit = True
        elif isinstance(value, svc.Client):
            value.close()

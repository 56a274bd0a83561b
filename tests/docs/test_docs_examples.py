"""The quickstarts and the go-live guide run as written.

Every fenced block of those pages whose info string carries the word ``run`` (```` ```python
run ````, ```` ```sh run ````) is executed, in page order, against a live reference server on
loopback -- the blocks are read from the files, so a new block runs without editing this
test.  A block ```` ```text output ```` right after a runnable block says what it prints:
each of its lines must be printed, in that order (``…`` stands for any text).

The pages are followed the way a reader follows them (:mod:`.reader`): their shell blocks
pasted into one ``bash``, each Python block into a new interactive ``python`` started from
that shell, so a Python block sees what the shell exported and nothing an earlier Python
block defined; each page twice in a row against the same server, as a reader trying it
again would.  The reader's environment starts with ``SVC_BASE_URL`` (the server under
test); every credential is made by the page's own steps.

Blocks without ``run`` are illustrative (placeholders such as ``svc_sk_live_...``, or
steps only a person can do) and are only shown.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from ..devchain.running import RunningDevchain
from ..support import LiveServer
from . import reader

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
    #: What the page says the block prints (its ```` ```text output ```` block).
    output: str = ""

    @property
    def python(self) -> bool:
        return self.language == "python"


def runnable_blocks(text: str) -> list[Block]:
    """The page's fenced blocks whose info string has the word ``run``, in order, each
    with the ``output`` block that follows it."""
    blocks: list[Block] = []
    after_run = False
    for m in FENCE.finditer(text):
        language, info, code = m.group(1), m.group(2).split(), m.group(3)
        if "output" in info:
            if not after_run:
                raise AssertionError(f"an `output` block must follow a `run` block: {code!r}")
            blocks[-1] = attrs.evolve(blocks[-1], output=code)
            after_run = False
            continue
        after_run = "run" in info
        if not after_run:
            continue
        if language != "python" and language not in SHELLS:
            raise AssertionError(f"a `run` block must be python or sh, not {language!r}")
        blocks.append(Block(language, code, text.count("\n", 0, m.start()) + 1))
    return blocks


def test_blocks_are_found() -> None:
    blocks = runnable_blocks(
        "x\n```python run\na = 1\n```\n```sh\nnot run\n```\n```sh run\necho $A\n```\n"
        "```text output\n1\n```\n"
    )
    assert [(b.language, b.code, b.line, b.output) for b in blocks] == [
        ("python", "a = 1\n", 2, ""),
        ("sh", "echo $A\n", 8, "1\n"),
    ]


def test_an_output_block_follows_a_run_block() -> None:
    with pytest.raises(AssertionError):
        runnable_blocks("```sh\nls\n```\n```text output\nx\n```\n")


def test_expected_output_is_printed_in_order() -> None:
    printed = "sel_123 svc_sk_test_\nTrue True\n0.05 rill\n"
    assert reader.expected_lines("sel_… svc_sk_test_\n0.05 rill\n", printed) == []
    assert reader.expected_lines("0.05 rill\nTrue True\n", printed) == ["True True"]
    assert reader.expected_lines("False", printed) == ["False"]


def test_a_python_block_is_pasted_into_a_real_repl(tmp_path: Path) -> None:
    """The REPL's rules, which a shared namespace would not apply: a statement after an
    indented block needs a blank line before it, and nothing an earlier paste defined
    is there."""
    env = dict(os.environ)
    glued = reader.paste_into_python(
        "for i in range(2):\n    print(i)\nprint('x')\n", env, tmp_path
    )
    assert "SyntaxError" in glued.trouble and glued.stdout == ""
    apart = reader.paste_into_python(
        "for i in range(2):\n    print(i)\n\nprint('x')\n", env, tmp_path
    )
    assert apart.trouble == "" and apart.stdout.split() == ["0", "1", "x"]
    first = reader.paste_into_python("seen = 1\n", env, tmp_path)
    later = reader.paste_into_python("print(seen)\n", env, tmp_path)
    assert first.trouble == "" and "NameError" in later.trouble


def test_a_terminal_keeps_its_exports_and_reports_a_failed_command(tmp_path: Path) -> None:
    terminal = reader.Terminal(dict(os.environ), tmp_path)
    try:
        assert terminal.paste("export SEEN=yes\nfalse\necho after").trouble.startswith(
            "failed: exit 1: false"
        )
        assert terminal.paste('echo "$SEEN"').stdout == "yes\n"
        assert terminal.environment()["SEEN"] == "yes"
        assert terminal.paste("false | true").trouble != ""  # pipefail
    finally:
        terminal.close()


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


#: Pages that walk live on ``svc-server devchain``: their server runs with the devchain's
#: ``SVC_LIVE_*`` exports, and the reader pasted its first payer's key into the terminal.
ON_DEVCHAIN = {"go-live.md"}


@pytest.fixture
def page_server(page: str, request: pytest.FixtureRequest) -> tuple[LiveServer, dict[str, str]]:
    """The server the page's reader started, and what the reader pasted besides."""
    if page not in ON_DEVCHAIN:
        return request.getfixturevalue("server"), {}
    devchain: RunningDevchain = request.getfixturevalue("devchain")
    make_server: Callable[..., LiveServer] = request.getfixturevalue("make_server")
    server = make_server(**devchain.live_settings())
    payer = devchain.new_payer(10_000_000)  # a wallet of the reader's own, 10 of the token
    return server, {"DEVCHAIN_PAYER_1_KEY": "0x" + bytes(payer.key).hex()}


def _reader_environment(server: LiveServer) -> dict[str, str]:
    """The reader's environment: this machine's, but no ``SVC_*`` variable other than
    the server under test; the `svc` command of this checkout, and the Python running
    this test first on the ``PATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SVC_", "DEVCHAIN_"))}
    return env | {
        "SVC_BASE_URL": server.url,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    }


def _follow(page: Path, blocks: list[Block], env: dict[str, str], folder: Path) -> None:
    """One reader follows the page from the top, in a new terminal in ``folder``."""
    terminal = reader.Terminal(env, folder)
    try:
        for block in blocks:
            where = f"docs/{page.name}:{block.line}"
            if block.python:
                pasted = reader.paste_into_python(block.code, terminal.environment(), folder)
            else:
                pasted = terminal.paste(block.code)
            # shown by pytest -s, or on failure
            print(f"--- {where}\n{pasted.stdout}", end="")
            print(pasted.stderr, end="", file=sys.stderr)
            if pasted.trouble:
                pytest.fail(f"{where}: {pasted.trouble}\n--- stdout\n{pasted.stdout}", False)
            missing = reader.expected_lines(block.output, pasted.stdout)
            if missing:
                pytest.fail(f"{where} did not print {missing}\n--- stdout\n{pasted.stdout}", False)
    finally:
        terminal.close()


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_a_reader_runs_it(
    page: str, page_server: tuple[LiveServer, dict[str, str]], tmp_path: Path
) -> None:
    """Twice, in the same folder, against the same server: a reader trying it again
    gets the same result (no e-mail already taken, no name already used)."""
    server, pasted = page_server
    path = ROOT / "docs" / page
    blocks = runnable_blocks(path.read_text())
    assert blocks, f"docs/{page} has no `run` block"
    assert any(b.output for b in blocks), f"docs/{page} says nothing it prints"
    missing = [t for t in SHELL_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"the shell steps of docs/{page} need {', '.join(missing)}: apt-get install")
    env = _reader_environment(server) | pasted
    for _ in range(2):
        _follow(path, blocks, env, tmp_path)


@pytest.mark.parametrize("page", PAGES)
def test_page_says_which_tools_it_uses(page: str) -> None:
    """A tool a shell step uses besides the kit (`jq`, `curl`) is named before the first
    step, where the reader installs things."""
    text = (ROOT / "docs" / page).read_text()
    first_step = re.search(r"^```[\w-]+ [^\n]*\brun\b", text, re.MULTILINE)
    assert first_step is not None, f"docs/{page} has no `run` block"
    before_first_step = text[: first_step.start()]
    for tool in ("curl", "jq"):
        used = any(re.search(rf"\b{tool}\b", b.code) for b in runnable_blocks(text) if not b.python)
        if used:
            assert f"`{tool}`" in before_first_step, f"docs/{page} uses {tool} without saying so"

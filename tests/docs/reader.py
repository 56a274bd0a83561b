"""A reader at one terminal, following a page: what `test_docs_examples` runs the
quickstarts with.

A reader pastes a page's shell blocks into one shell, so what a block ``export``\\ s is set
for every block after it; and pastes each Python block into a new ``python`` started from
that shell (the REPL is closed again to paste the next shell block), so a Python block
sees the shell's exported variables and nothing an earlier Python block defined.  Both are
run here that way: :class:`Terminal` is one ``bash`` reading the pasted lines from its
standard input, :func:`paste_into_python` one interactive interpreter (``python -i -q``)
fed the block's text exactly as pasted, with Python 3.11's REPL rules (a blank line ends
an indented block, and one is needed after each).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import IO

import attrs

__all__ = ["Pasted", "Terminal", "expected_lines", "paste_into_python", "problems_in_python"]

#: Seconds one block may take.
BLOCK_SECONDS = 180


@attrs.frozen
class Pasted:
    """What one pasted block printed, and the trouble it met (empty when none)."""

    stdout: str
    stderr: str
    trouble: str


class _Stream:
    """A pipe read into one growing string by a thread, so neither pipe fills up."""

    def __init__(self, pipe: IO[str] | None) -> None:
        if pipe is None:
            raise RuntimeError("the process has no such pipe")
        self.text = ""
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        for line in iter(pipe.readline, ""):
            with self._changed:
                self.text += line
                self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: marker in self.text, timeout)


class Terminal:
    """One shell a reader pastes a page's shell blocks into, block after block.

    Like an interactive shell it stops at no error; a command that fails is reported by
    an ``ERR`` trap (so a failure inside a block is seen, not only the last command's), and
    ``pipefail`` makes ``svc ... | jq`` fail when ``svc`` does, as the reader sees ``svc``'s
    error.  Its process group (with whatever a block left running in the background) is
    ended by :meth:`close`.
    """

    _FAILED = "__reader_command_failed__"

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        bash = shutil.which("bash")
        if bash is None:
            raise RuntimeError("the shell blocks need bash")
        self.cwd = cwd
        self._process = subprocess.Popen(
            [bash, "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
            start_new_session=True,
        )
        self._out = _Stream(self._process.stdout)
        self._err = _Stream(self._process.stderr)
        self._type(
            f"set -o pipefail\ntrap 'echo \"{self._FAILED} exit $?: $BASH_COMMAND\" >&2' ERR\n"
        )

    def _type(self, text: str) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise RuntimeError("the terminal has no input")
        stdin.write(text)
        stdin.flush()

    def paste(self, code: str) -> Pasted:
        """``code`` pasted at the prompt (and Enter pressed), once it has all run."""
        done = f"__reader_block_done_{uuid.uuid4().hex}__"
        out_from, err_from = len(self._out.text), len(self._err.text)
        self._type(f"{code}\n")
        self._type(f"echo {done}; echo {done} >&2\n")
        finished = self._out.wait_for(done, BLOCK_SECONDS) and self._err.wait_for(done, 10)
        stdout = self._out.text[out_from:].split(done)[0]
        stderr = self._err.text[err_from:].split(done)[0]
        if not finished:
            trouble = "the shell did not finish the block"
            if self._process.poll() is not None:
                trouble = f"the shell exited ({self._process.returncode})"
            return Pasted(stdout, stderr, trouble)
        failed = [line for line in stderr.splitlines() if self._FAILED in line]
        return Pasted(stdout, stderr, "\n".join(failed).replace(self._FAILED, "failed:"))

    def environment(self) -> dict[str, str]:
        """The variables the shell exports now: what a ``python`` started from it gets."""
        dump = self.cwd / f".reader-env-{uuid.uuid4().hex}"
        pasted = self.paste(f'env -0 > "{dump}"')
        if pasted.trouble:
            raise RuntimeError(pasted.trouble)
        try:
            items = dump.read_text().split("\0")
        finally:
            dump.unlink()
        return dict(item.split("=", 1) for item in items if "=" in item)

    def close(self) -> None:
        """The terminal closed: the shell and everything it started are ended."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()


#: What the REPL prints on its standard error when a pasted statement failed.
_PYTHON_TROUBLE = re.compile(
    r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b.*$", re.MULTILINE
)


def problems_in_python(stderr: str) -> str:
    """The failures an interactive interpreter reported (tracebacks, syntax errors)."""
    if _PYTHON_TROUBLE.search(stderr) is None:
        return ""
    return stderr.replace(">>> ", "").replace("... ", "").strip()


def paste_into_python(code: str, env: dict[str, str], cwd: Path) -> Pasted:
    """``code`` pasted into a new ``python`` REPL (then Enter, then end of input)."""
    done = subprocess.run(
        [sys.executable, "-i", "-q"],
        input=code + "\n",
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BLOCK_SECONDS,
    )
    trouble = problems_in_python(done.stderr)
    if done.returncode != 0 and not trouble:
        trouble = f"python exited {done.returncode}"
    return Pasted(done.stdout, done.stderr, trouble)


def expected_lines(expected: str, printed: str) -> list[str]:
    """The lines of ``expected`` not printed, in order, by ``printed`` (``…`` in an
    expected line stands for any text)."""
    lines = printed.splitlines()
    at = 0
    missing = []
    for want in filter(None, (line.strip() for line in expected.splitlines())):
        pattern = re.compile(".*?".join(re.escape(part) for part in want.split("…")))
        for i in range(at, len(lines)):
            if pattern.fullmatch(lines[i].strip()):
                at = i + 1
                break
        else:
            missing.append(want)
    return missing

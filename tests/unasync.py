"""Generate the blocking twins from their async sources: ``python -m tests.unasync``.

The SDK client, its namespaces and their send helpers exist twice, once with
``async``/``await`` and once blocking.  The async file is the source (the namespaces are
themselves generated from the route table by ``python -m reference_server.sdk_codegen``);
its twin is this script's output:
every line goes through the substitution table below (whole words only), then ``ruff``
sorts the imports, drops the ones left unused and formats it.  ``--check`` writes
nothing and exits 1 if a generated file is not what its source gives (the test suite
runs it: tests/sdk/test_twins.py).

What cannot be a word-for-word substitution lives in hand-written code the source
imports: ``svc/_paging.py`` (``aiterate`` / ``iterate``).

The script lives in ``tests/`` because it is a development tool, not part of any shipped
package, and because it uses ``reference_server.generated`` (which ``svc`` must not
import).  Like httpcore's
``scripts/unasync.py``, it also fails when a substitution is used by no file, so the
table holds only rules that are needed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from reference_server.generated import checking, formatted, refresh

__all__ = ["PAIRS", "ROOT", "generate", "main"]

ROOT = Path(__file__).resolve().parent.parent

#: Async source -> generated blocking twin, relative to the repository root.
PAIRS = {
    "svc/_async_client.py": "svc/_client.py",
    "svc/_async_namespaces.py": "svc/_namespaces.py",
    "svc/_async_send.py": "svc/_send.py",
    "svc/_async_pay_url_stream.py": "svc/_pay_url_stream.py",
}

#: (regex, replacement), applied in order to every line.  A pattern that starts or ends
#: with a word character only matches there as a whole word.
SUBS: list[tuple[str, str]] = [
    # the per-flavour pieces each source imports
    (r"\._async_namespaces", "._namespaces"),
    (r"\._async_send", "._send"),
    (r"\._async_pay_url_stream", "._pay_url_stream"),
    # AsyncClient, AsyncIterator, AsyncWebhooks, httpx.AsyncBaseTransport...
    (r"Async([A-Z]\w*)", r"\1"),
    (r"async def", "def"),
    (r"async with", "with"),
    (r"async for", "for"),
    (r"await ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"aclose", "close"),
    (r"aread", "read"),
    (r"aiter_lines", "iter_lines"),
    (r"anext", "next"),
    (r"__aiter__", "__iter__"),
    (r"aiterate", "iterate"),
    (r"Awaitable\[None\]", "None"),
    (r"import anyio", "import time"),
    (r"anyio\.sleep", "time.sleep"),
]


def _compile(pattern: str) -> re.Pattern[str]:
    left = r"(?<!\w)" if re.match(r"\w", pattern) else ""
    right = r"(?!\w)" if re.search(r"\w$", pattern) else ""
    return re.compile(left + pattern + right)


_COMPILED = [(_compile(pattern), replacement) for pattern, replacement in SUBS]


def _header(source: str) -> str:
    return f"# Generated from {source} by `python -m tests.unasync` -- do not edit.\n"


def _unasync(text: str, used: set[int]) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        for index, (regex, replacement) in enumerate(_COMPILED):
            line, count = regex.subn(replacement, line)
            if count:
                used.add(index)
        lines.append(line)
    return "".join(lines)


def generate(source: str, target: str, used: set[int] | None = None) -> str:
    """The text ``target`` must hold: ``source`` unasynced, imports fixed, formatted."""
    text = _header(source) + _unasync(
        (ROOT / source).read_text(), used if used is not None else set()
    )
    # the imports sort differently once renamed; Awaitable & co. are left unused
    return formatted(text, target)


def main(argv: list[str] | None = None) -> int:
    check = checking(argv)
    used: set[int] = set()
    stale = [
        target
        for source, target in PAIRS.items()
        if not refresh(
            ROOT / target, generate(source, target, used), check=check, name=target, source=source
        )
    ]
    unused = [SUBS[i] for i in range(len(SUBS)) if i not in used]
    if unused:
        print(f"substitutions no source uses (delete them): {unused}")
        return 1
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run `python -m tests.unasync`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which characters the API takes in text: one rule for every string a request carries
(docs/api.md, "What text the API takes").

A control character in an id, a name or a cursor is never meant: it is a probe, an
injection or a client bug.  PostgreSQL cannot even store NUL, and SQLite stores it and
hands it back to every reader; so the service refuses such text at its input boundary,
before any route sees it, with the same answer on both databases.
"""

from __future__ import annotations

import re

__all__ = ["first_forbidden", "first_forbidden_in_body_text", "name_of"]

_LINE_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f]")
#: Body text may span lines (tab, LF, CR); a lone surrogate parses, but no database stores it.
_BODY_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def first_forbidden(text: str) -> str | None:
    """The first character single-line text (path, query, header) may not hold."""
    found = _LINE_FORBIDDEN.search(text)
    return None if found is None else found.group()


def first_forbidden_in_body_text(text: str) -> str | None:
    """The first character a JSON body string may not hold."""
    found = _BODY_FORBIDDEN.search(text)
    return None if found is None else found.group()


def name_of(char: str) -> str:
    """``U+0000``: how an error message names a character it cannot print."""
    return f"U+{ord(char):04X}"

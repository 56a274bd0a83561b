"""The unlocked answer as ``pay-url`` returns it: a bounded body as text, its headers.

The body is read up to ``unlock_body_max_bytes`` (8 KB) and the rest is never downloaded
(``body_truncated``).  It is returned as text: UTF-8 when the bytes are UTF-8 -- a cut that
fell inside a character drops that character's first bytes rather than return half of
it -- and base64 otherwise, so binary answers survive JSON.  Headers are the end-to-end
ones (hop-by-hop headers describe a connection the caller never had, and
``Content-Length`` would describe a body the caller may not get whole).
"""

from __future__ import annotations

import base64

import attrs
import httpx

__all__ = ["Unlocked", "end_to_end", "unlocked"]

#: RFC 9110 7.6.1 connection headers, and framing that does not survive the cut.
_NOT_RETURNED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
#: A UTF-8 character is at most four bytes: a cut can leave at most three of one.
_LONGEST_PARTIAL = 3


@attrs.frozen(kw_only=True)
class Unlocked:
    status: int
    headers: dict[str, str]
    body: str
    #: ``utf-8`` or ``base64``.
    encoding: str
    truncated: bool


def unlocked(status: int, headers: httpx.Headers, body: bytes, truncated: bool) -> Unlocked:
    text, encoding = _as_text(body, truncated)
    return Unlocked(
        status=status,
        headers=end_to_end(headers),
        body=text,
        encoding=encoding,
        truncated=truncated,
    )


def _as_text(body: bytes, truncated: bool) -> tuple[str, str]:
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        cut_inside_a_character = (
            truncated
            and exc.reason == "unexpected end of data"
            and exc.start >= len(body) - _LONGEST_PARTIAL
        )
        if cut_inside_a_character:
            return body[: exc.start].decode("utf-8"), "utf-8"
    return base64.b64encode(body).decode("ascii"), "base64"


def end_to_end(headers: httpx.Headers) -> dict[str, str]:
    """The headers ``pay-url`` returns (and a stream's ``head`` relays): lowercase names;
    a repeated header's values joined with ``, `` (RFC 9110 5.3)."""
    named_by_connection = {
        token.strip().lower()
        for value in headers.get_list("connection")
        for token in value.split(",")
    }
    kept: dict[str, list[str]] = {}
    for name, value in headers.multi_items():
        name = name.lower()
        if name not in _NOT_RETURNED and name not in named_by_connection:
            kept.setdefault(name, []).append(value)
    return {name: ", ".join(values) for name, values in kept.items()}

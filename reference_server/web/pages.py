"""Pages for people: server-rendered HTML served through the one pipeline.

The sandbox payout processor's onboarding page and every resource's pay page share these
rules: answers may not be framed, cached or leak their URL in a ``Referer``; no script
runs (the CSP allows none, and the pages need none); a form is a short urlencoded body,
and a POST from another site is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jinja2
from starlette.responses import HTMLResponse

from .endpoint import Call

__all__ = ["HEADERS", "TEMPLATES", "cross_site", "read_form", "render"]

#: The templates of every page, packaged with the server (pyproject's package-data).
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent.parent / "routes" / "templates"),
    autoescape=True,
)
#: Answers of these pages may not be framed, cached, or leak their URL in a Referer to
#: another site.  ``same-origin`` rather than ``no-referrer``: under ``no-referrer`` a
#: browser sends the page's own form POST with ``Origin: null``, which a browser without
#: fetch metadata could then not tell from a cross-site one (see :func:`cross_site`).
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
#: A form body is a few short fields; anything longer is refused unread.
MAX_FORM_BYTES = 8 * 1024


def render(template: str, status: int = 200, **values: Any) -> HTMLResponse:
    """``template`` rendered with ``values``, answered with the pages' headers."""
    html = TEMPLATES.get_template(template).render(**values)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def cross_site(call: Call) -> bool:
    """A browser says where a POST comes from: refuse another site's.

    ``Sec-Fetch-Site`` (set by the browser, never by a page) decides when sent.  Only
    without it is ``Origin`` compared with the server's own (the pages' ``same-origin``
    referrer policy lets a browser send its real origin; ``null`` is refused there).
    """
    site = call.headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = call.headers.get("origin")
    if origin is None or origin == "null":
        return origin == "null"
    mine = urlsplit(call.public_url)
    theirs = urlsplit(origin)
    return (theirs.scheme, theirs.netloc) != (mine.scheme, mine.netloc)


async def read_form(call: Call) -> dict[str, str] | None:
    """The urlencoded form, one value per field; ``None`` when it is not one."""
    kind = call.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in call.request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        parsed = parse_qs(
            body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, max_num_fields=20
        )
    except (UnicodeDecodeError, ValueError):
        return None
    return {name: values[-1] for name, values in parsed.items()}

"""Pages for people: server-rendered HTML served through the one pipeline, with the
headers, form reading and cross-site refusal they all share.

A form is read through the same input boundary as the API (:mod:`.text`): every field is
UTF-8 without control characters, or it is not handed on (:class:`Form`), so a page
stores nothing the API would have refused and shows what to fix instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import attrs
import jinja2
from starlette.responses import HTMLResponse

from .endpoint import Call
from .text import first_forbidden, name_of

__all__ = [
    "HEADERS",
    "TEMPLATES",
    "Form",
    "cross_site",
    "forms_may_go_to",
    "message",
    "read_form",
    "render",
]

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


def forms_may_go_to(page: HTMLResponse, origin: str) -> HTMLResponse:
    """``page``, its forms allowed to end up at ``origin``: a browser holds the redirect
    that answers a form to the page's ``form-action`` too (the 303 to a processor's hosted
    Checkout or onboarding)."""
    csp = HEADERS["Content-Security-Policy"]
    page.headers["Content-Security-Policy"] = csp.replace(
        "form-action 'self'", f"form-action 'self' {origin}"
    )
    return page


def message(status: int, title: str, *lines: str) -> HTMLResponse:
    """A page that says ``lines`` under ``title``, and nothing more."""
    return render("page_message.html", status, title=title, lines=list(lines))


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


@attrs.frozen
class Form:
    """A form as the input boundary lets it through: ``values``, one per field, holds
    only text the API would take; ``errors`` says, per field, why a value was held back.
    A page shows ``errors`` (a 422, the form again) before it acts on ``values``."""

    values: dict[str, str]
    errors: dict[str, str]

    def get(self, name: str, default: str = "") -> str:
        return self.values.get(name, default)


#: The key of :attr:`Form.errors` for a field whose very name is not text.
BAD_NAME = "form"


async def read_form(call: Call) -> Form | None:
    """The urlencoded form, one value per field (the last one sent); ``None`` when the
    body is not such a form (not urlencoded, too long, too many fields)."""
    kind = call.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in call.request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        # Read byte for byte (Latin-1 both ways), so each field is decoded as UTF-8 on
        # its own below and a bad one is named rather than the whole form refused.
        pairs = parse_qsl(
            body.decode("latin-1"), keep_blank_values=True, max_num_fields=20, encoding="latin-1"
        )
    except ValueError:
        return None
    values: dict[str, str] = {}
    errors: dict[str, str] = {}
    for raw_name, raw_value in pairs:
        name = _text(raw_name.encode("latin-1"))
        if name is None or first_forbidden(name) is not None:
            errors[BAD_NAME] = "The form holds a field that is not text; send it from its page."
            continue
        value, problem = _value(raw_value.encode("latin-1"))
        if problem is None:
            values[name] = value
        else:
            errors[name] = problem
    # A field sent twice is held back if either value is: which one a page reads is moot.
    return Form(values={k: v for k, v in values.items() if k not in errors}, errors=errors)


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _value(raw: bytes) -> tuple[str, str | None]:
    """A field's value and why the input boundary holds it back, if it does: every field
    of these pages is one line of text (:func:`.text.first_forbidden`'s rule)."""
    value = _text(raw)
    if value is None:
        return "", "This entry could not be read as text (it is not UTF-8); type it again."
    bad = first_forbidden(value)
    if bad is None:
        return value, None
    return "", (
        f"This entry contains an invisible control character ({name_of(bad)}); "
        "remove it and type it again."
    )

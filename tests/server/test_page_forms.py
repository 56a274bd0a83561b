"""Every form a page reads passes the API's input boundary (``web.pages.read_form``).

Generated from the route table: each page that takes a POST is opened in a real server,
its form filled in as a browser would, and each field in turn sent with a control
character (NUL, DEL, ESC, C1's NEL and APC) or bytes that are not UTF-8 in the middle of
a good value -- and a field whose very name is one.  Each answer is the form again, 422,
naming the problem; never a 500; and nothing in the database changes (on PostgreSQL a
NUL was a 500; on SQLite it was stored, and a card number holding a control character
that the card check skips as a space was paid).
"""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote_from_bytes

import httpx
import pytest
from sqlalchemy import select

from reference_server.app import served
from reference_server.store import tables as t

from ..buypage.helpers import BROWSER, FUTURE, PAYING, item
from ..support import LiveServer, new_account

#: What goes into the middle of a good value: control characters, then bytes that are
#: not UTF-8 (a lone continuation byte, and a Latin-1 ``é``).
BAD: list[bytes] = [b"\x00", b"\x7f", b"\x1b", "\x85".encode(), "\x9f".encode(), b"\x80", b"\xe9"]
#: A good value for each text field the pages have.
GOOD_TEXT = {"legal_name": "Ada Lovelace", "number": PAYING, "expiry": FUTURE, "cvc": "123"}


def _buy_page(live: LiveServer) -> str:
    return item(live).pay_url


def _onboarding(live: LiveServer) -> str:
    acct = new_account(live.url)
    r = httpx.post(
        live.url + "/sellers/me/connect/onboard",
        json={"country": "US", "type": "express"},
        headers={"Authorization": f"Bearer {acct.seller_key}"},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["onboard_url"])


def _card_top_up(live: LiveServer) -> str:
    acct = new_account(live.url)
    r = httpx.post(
        live.url + "/owners/me/top-ups",
        json={"amount": "1.00", "method": "card"},
        headers={"Authorization": f"Bearer {acct.owner_jwt}", "X-Svc-Environment": "test"},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["checkout_url"])


def _approval(live: LiveServer) -> str:
    """A wallet key's approval link (the approval itself made in the database, as a
    pay-url over the line makes it: the page reads the row)."""
    from ..approvals.helpers import make_approval

    return make_approval(live)


#: How a test opens each page with a form: a page added tomorrow needs a line here.
PAGES: dict[str, Callable[[LiveServer], str]] = {
    "/approvals/{token}": _approval,
    "/buy/{short_id}": _buy_page,
    "/sandbox/connect/onboard/{token}": _onboarding,
    "/top-ups/{top_up_id}/pay": _card_top_up,
}
#: The dashboard's forms hold hidden fields only, post to their own actions and need a
#: session: tests/dashboard/test_forms.py sends them the same bad fields.
FORM_ROUTES = sorted(
    ep.path
    for ep in served()
    if ep.page and ep.method == "POST" and not ep.path.startswith("/dashboard/")
)


def test_every_page_form_is_covered() -> None:
    assert FORM_ROUTES and sorted(PAGES) == FORM_ROUTES


class _Fields(HTMLParser):
    """A form's fields with the values a person would send (the first button pressed)."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name, kind, value = a.get("name"), a.get("type"), a.get("value") or ""
        if name is None or name in self.fields:
            return
        if tag == "input" and kind in ("hidden", "radio", "checkbox"):
            self.fields[name] = value
        elif tag == "input":
            self.fields[name] = GOOD_TEXT[name]
        elif tag == "button":
            self.fields[name] = value


def _fields(url: str) -> dict[str, str]:
    page = httpx.get(url, timeout=30)
    assert page.status_code == 200, page.text
    parser = _Fields()
    parser.feed(page.text)
    assert parser.fields, page.text
    return parser.fields


def _body(fields: dict[str, str], name: bytes, value: bytes) -> bytes:
    """The urlencoded form with ``name`` set to ``value`` (both raw bytes)."""
    pairs = [(k.encode(), v.encode()) for k, v in fields.items() if k.encode() != name]
    pairs.append((name, value))
    return b"&".join(
        quote_from_bytes(k).encode() + b"=" + quote_from_bytes(v).encode() for k, v in pairs
    )


def _database(live: LiveServer) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, to see that a refused form changed nothing."""
    with live.ctx.db.read() as conn:
        return {
            table.name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
            for table in t.metadata.sorted_tables
        }


@pytest.mark.parametrize("route", FORM_ROUTES)
def test_a_field_the_api_would_refuse_is_shown_not_stored(server: LiveServer, route: str) -> None:
    url = PAGES[route](server)
    fields = _fields(url)
    cases = [(name.encode(), value.encode(), bad) for name, value in fields.items() for bad in BAD]
    cases += [(b"extra" + bad, b"x", bad) for bad in BAD[:1] + BAD[-1:]]
    before = _database(server)
    problems = []
    for name, good, bad in cases:
        value = good[:1] + bad + good[1:]
        r = httpx.post(
            url,
            content=_body(fields, name, value),
            headers={**BROWSER, "Content-Type": "application/x-www-form-urlencoded"},
            timeout=30,
        )
        shown = "U+" in r.text or "not UTF-8" in r.text or "not text" in r.text
        if (
            r.status_code != 422
            or "<form" not in r.text
            or 'role="alert"' not in r.text
            or not shown
        ):
            problems.append(f"{name!r}={value!r}: {r.status_code} {r.text[:300]}")
        if _database(server) != before:
            problems.append(f"{name!r}={value!r}: stored ({r.status_code})")
            before = _database(server)
    assert not problems, "\n".join(problems)


def test_the_form_again_names_the_field_and_keeps_the_good_entries(server: LiveServer) -> None:
    url = _onboarding(server)
    fields = {**_fields(url), "legal_name": "Ada\x00Lovelace"}
    r = httpx.post(url, data=fields, headers=BROWSER, timeout=30)
    assert r.status_code == 422, r.text
    assert 'id="legal_name-error"' in r.text and "U+0000" in r.text
    assert 'value="succeeds" required checked' in r.text  # the bank account chosen, kept
    done = httpx.post(url, data={**fields, "legal_name": "Ada Lovelace"}, headers=BROWSER)
    assert done.status_code == 200 and "Onboarding complete" in done.text, done.text


#: Text the boundary lets through that a page's own checks must still answer well:
#: non-ASCII letters and digits, a line separator, a byte-order mark.
ODD_TEXT = ["\u00e9", "\u00b2", "\u0664", "\u2028", "\ufeff"]


@pytest.mark.parametrize("route", FORM_ROUTES)
def test_no_entry_is_a_500(server: LiveServer, route: str) -> None:
    url = PAGES[route](server)
    fields = _fields(url)
    problems = []
    for name, good in fields.items():
        for value in [v for odd in ODD_TEXT for v in (good[:1] + odd + good[1:], good + odd)]:
            r = httpx.post(url, data={**fields, name: value}, headers=BROWSER, timeout=30)
            if r.status_code >= 500:
                problems.append(f"{name}={value!r}: {r.status_code} {r.text[:200]}")
    assert not problems, "\n".join(problems)

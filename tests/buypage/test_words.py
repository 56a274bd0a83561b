"""Pages for people speak to people: the pages a person ends on (a receipt, onboarding
done or saved for later, a link that cannot be used) name no API route, say in a sentence
what to do now, and link back somewhere that answers; a card the sandbox refuses is not
shown back whole; the button says what it pays.

The routes a page must not name are read from the route table, so a new API route is
covered without editing this test.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

import httpx
import pytest

from reference_server.app import served

from ..payouts.helpers import complete_onboarding, onboard_url, shop
from ..support import LiveServer
from .helpers import DECLINED, item, pay, token_of

#: The API's paths, as far as they are fixed (``/sellers/me/connect/sync``,
#: ``/access/verify``, ``/pay``...): none is for a person to read.
API_PATHS = sorted(
    {ep.path.split("{")[0].rstrip("/") for ep in served() if ep.contract.listed} - {""},
    key=len,
    reverse=True,
)


class _Page(HTMLParser):
    """What a person reads on a page (its text, not its markup or style), its links, and
    the paragraph that says what to do next (``id="next"``)."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.links: list[str] = []
        self.next_step = ""
        self._skip = 0
        self._in_next = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("style", "title"):
            self._skip += 1
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))
        if found.get("id") == "next" or self._in_next:
            self._in_next += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title"):
            self._skip -= 1
        if self._in_next:
            self._in_next -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)
        if self._in_next:
            self.next_step += data


def read_page(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def assert_speaks_to_a_person(answer: httpx.Response) -> None:
    """No route, no ``/api``; a sentence saying what to do; a link back that answers."""
    html = answer.text
    page = read_page(html)
    text = " ".join(" ".join(page.text).split())
    assert "/api" not in html, text
    assert not re.search(r"\b(GET|POST|PUT|PATCH|DELETE) /", text), text
    named = [p for p in API_PATHS if re.search(rf"(?<![\w.]){re.escape(p)}(?![\w-])", text)]
    assert not named, f"the page names API routes {named}: {text}"
    next_step = " ".join(page.next_step.split())
    assert next_step.endswith(".") and len(next_step.split()) >= 5, (
        f"no sentence saying what to do: {text}"
    )
    assert page.links, f"no link back: {text}"
    for link in page.links:
        target = urljoin(str(answer.url), link)
        assert httpx.get(target, headers={"Accept": "text/html"}).status_code == 200, target


def test_the_receipt_page_speaks_to_a_person(server: LiveServer) -> None:
    it = item(server, amount="0.05")
    receipt = pay(it)
    assert receipt.status_code == 200 and "Payment received" in receipt.text
    assert_speaks_to_a_person(receipt)


def test_the_onboarding_pages_speak_to_a_person(server: LiveServer) -> None:
    s = shop(server)

    later = complete_onboarding(onboard_url(s), button="Finish later")
    assert later.status_code == 200 and "Saved with requirements due" in later.text
    assert_speaks_to_a_person(later)
    url = onboard_url(s)
    done = complete_onboarding(url)
    assert done.status_code == 200 and "Onboarding complete" in done.text
    assert_speaks_to_a_person(done)
    used_up = httpx.get(url)
    assert used_up.status_code == 404 and "not usable" in used_up.text
    assert_speaks_to_a_person(used_up)
    unknown_login = httpx.get(server.url + "/sandbox/connect/login/no-such-link")
    assert unknown_login.status_code == 404
    assert_speaks_to_a_person(unknown_login)


@pytest.mark.parametrize(("kind", "words"), [("express", "an express"), ("standard", "a standard")])
def test_the_onboarding_page_says_an_express(server: LiveServer, kind: str, words: str) -> None:
    s = shop(server)
    r = s.post("/sellers/me/connect/onboard", {"country": "US", "type": kind})
    assert r.status_code == 200, r.text
    text = " ".join(" ".join(read_page(httpx.get(r.json()["onboard_url"]).text).text).split())
    assert f"for {words} seller" in text, text


def test_the_button_says_what_it_pays(server: LiveServer) -> None:
    html = httpx.get(item(server, amount="0.05").pay_url).text
    assert '<button type="submit">Pay 0.05 USD</button>' in html


def _number_field(html: str) -> str:
    found = re.search(r'<input[^>]*\bname="number"[^>]*>', html, re.DOTALL)
    assert found is not None, html
    value = re.search(r'\bvalue="([^"]*)"', found.group(0))
    return "" if value is None else value.group(1)


@pytest.mark.parametrize(
    ("number", "status"),
    [(DECLINED, 402), ("5555 5555 5555 4444", 422)],
    ids=["declined", "not-a-sandbox-card"],
)
def test_a_refused_card_is_not_shown_back_whole(
    server: LiveServer, number: str, status: int
) -> None:
    """Declined, or a card the sandbox does not take (a real one, typed by mistake): the
    page says which card by its last four digits, and the number field starts empty."""
    it = item(server)
    refused = pay(it, number=number, token=token_of(httpx.get(it.pay_url).text))
    assert refused.status_code == status, refused.text
    digits = number.replace(" ", "")
    assert _number_field(refused.text) == ""
    assert f"ending in {digits[-4:]}" in refused.text
    if number != DECLINED:  # the sandbox's own declined card is named in its instructions
        assert number not in refused.text and digits not in refused.text
        assert digits[:12] not in re.sub(r"\D", "", refused.text)

"""Every dashboard page the route table serves (each ``GET /dashboard...`` page without a
path parameter), in a real browser, on an owner with sellers, payments and webhook
deliveries: it has a language and one ``h1``; every control has an accessible name;
text contrasts at least 4.5:1 with its background (3:1 when large); and the Tab key
reaches every control, each showing where the focus is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reference_server.app import served

from ..money.helpers import market
from ..support import LiveServer
from ..webhooks.receiver import start_receiver
from .helpers import hook, link

PAGES = sorted(
    ep.path
    for ep in served()
    if ep.page is not None
    and ep.method == "GET"
    and ep.path.startswith("/dashboard")
    and "{" not in ep.path
)

# What the page itself says about its controls, headings and colours; checked in the
# browser, where styles are computed.
_AUDIT = """() => {
  const named = (el) => {
    if (el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')) return true;
    if (el.labels && el.labels.length) return true;
    return el.tagName === 'BUTTON' || el.tagName === 'A' ? el.innerText.trim() !== '' : false;
  };
  const controls = [...document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea')];
  const unnamed = controls.filter((el) => !named(el)).map((el) => el.outerHTML.slice(0, 120));
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const channel = (c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  };
  const background = (el) => {
    for (let at = el; at; at = at.parentElement) {
      const [r, g, b, a] = rgb(getComputedStyle(at).backgroundColor);
      if (a === undefined || a > 0) return [r, g, b];
    }
    return [255, 255, 255];
  };
  const poor = [];
  for (const el of document.body.querySelectorAll('*')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.closest('svg') || !el.getClientRects().length) continue;
    const style = getComputedStyle(el);
    const fg = luminance(rgb(style.color)), bg = luminance(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < needed) poor.push(`${ratio.toFixed(2)}: ${el.outerHTML.slice(0, 100)}`);
  }
  const focusable = controls.filter((el) => !el.disabled && el.getClientRects().length);
  return {
    lang: document.documentElement.lang,
    h1: document.querySelectorAll('h1').length,
    unnamed, poor,
    focusable: focusable.map((el) => el.outerHTML.slice(0, 120)),
  };
}"""

_FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const shown = (style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0)
    || style.boxShadow !== 'none';
  return {html: el.outerHTML.slice(0, 120), shown};
}"""


@pytest.fixture(scope="module")
def signed_in_world(
    module_server: LiveServer, browser: Any
) -> Iterator[Callable[[], tuple[LiveServer, Any]]]:
    """One owner with a seller, payments (one refunded) and a webhook endpoint whose
    deliveries failed once; a browser context signed in as that owner."""
    receiver = start_receiver()
    receiver.statuses = [500]
    m = market(module_server)
    hook(module_server, m.seller_owner_jwt, receiver.url)
    for _ in range(3):
        m.agent.pay(resource_id=m.resource.id)
    receiver.wait_for(1)
    context = browser.new_context()
    page = context.new_page()
    page.goto(link(module_server, m.seller_owner_jwt))
    assert page.url == f"{module_server.url}/dashboard"
    yield lambda: (module_server, page)
    context.close()
    receiver.server.shutdown()


def test_the_route_table_has_dashboard_pages() -> None:
    assert "/dashboard" in PAGES and "/dashboard/payments" in PAGES


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.parametrize("environment", ["test", "live"])
def test_every_dashboard_page_is_accessible(
    signed_in_world: Callable[[], tuple[LiveServer, Any]], path: str, environment: str
) -> None:
    live, page = signed_in_world()
    answer = page.goto(f"{live.url}{path}?environment={environment}")
    assert answer is not None and answer.status == 200, path
    audit = page.evaluate(_AUDIT)
    assert audit["lang"], path
    assert audit["h1"] == 1, path
    assert audit["unnamed"] == [], path
    assert audit["poor"] == [], path
    assert len(audit["focusable"]) >= 4, audit  # the navigation's links and forms at least
    reached: list[str] = []
    for _ in range(len(audit["focusable"]) + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate(_FOCUSED)
        if focused is None or focused["html"] in reached:
            continue
        assert focused["shown"], f"no visible focus on {focused['html']} ({path})"
        reached.append(focused["html"])
    missing = [html for html in audit["focusable"] if html not in reached]
    assert missing == [], path
    print(path, environment, len(audit["focusable"]), "controls reached by Tab")

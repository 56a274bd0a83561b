"""``GET /``: whoever only knows the server's address gets somewhere, a browser a small
page and anything else JSON, both pointing to the discovery documents, the directory and
the reference."""

from __future__ import annotations

import re

import httpx
import pytest

from reference_server.routes.discovery import wants_html

from ..support import LiveServer

#: What Chromium sends for a page it navigates to.
BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
POINTERS = ("/llms.txt", "/agent-openapi.json", "/directory", "/llms-full.txt")


def test_a_browser_gets_a_page_that_links_to_where_to_start(server: LiveServer) -> None:
    r = httpx.get(server.url + "/", headers={"Accept": BROWSER_ACCEPT})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "Accept" in r.headers["vary"]
    assert r.headers["cache-control"] == "no-store"  # the pages' own headers
    links = re.findall(r'<a href="([^"]+)"', r.text)
    assert {server.url + path for path in POINTERS} <= set(links)
    for link in links:  # each one answers
        assert httpx.get(link).status_code == 200, link
    assert "<h1>svc payments service</h1>" in r.text


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "text/html;q=0.5, */*"])
def test_anything_else_gets_json_pointing_to_the_same(
    server: LiveServer, accept: str | None
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    for path in ("/", "/api/"):
        r = httpx.get(server.url + path, headers=headers)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert "Accept" in r.headers["vary"]
        body = r.json()
        assert body["ok"] is True and body["request_id"] == r.headers["x-request-id"]
        assert body["llms_txt_url"] == server.url + "/llms.txt"
        assert body["openapi_url"] == server.url + "/agent-openapi.json"
        assert body["directory_url"] == server.url + "/directory"
        assert body["docs_url"] == server.url + "/llms-full.txt"
        for key, url in body.items():
            if key.endswith("_url") and key != "mcp_url":
                assert httpx.get(url).status_code == 200, url


def test_html_only_when_asked_above_json() -> None:
    assert wants_html(BROWSER_ACCEPT)
    assert wants_html("text/html")
    assert not wants_html("")
    assert not wants_html("*/*")
    assert not wants_html("application/json, text/html;q=0.9")
    assert not wants_html("text/html;q=0")
    assert not wants_html("text/html;q=oops")

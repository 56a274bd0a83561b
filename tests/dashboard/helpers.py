"""Set-ups for the dashboard tests: a sign-in link, a signed-in HTTP client, and the
CSRF token a page's forms carry."""

from __future__ import annotations

import re

import httpx

from ..support import LiveServer


def link(live: LiveServer, owner_jwt: str) -> str:
    """A fresh one-time sign-in link of the owner (``POST /owners/me/dashboard-link``)."""
    r = httpx.post(
        f"{live.url}/owners/me/dashboard-link",
        headers={"Authorization": f"Bearer {owner_jwt}"},
    )
    assert r.status_code == 201, r.text
    url = str(r.json()["url"])
    assert url.startswith(f"{live.url}/dashboard/login/")
    return url


def signed_in(live: LiveServer, owner_jwt: str) -> httpx.Client:
    """An HTTP client holding the owner's dashboard session cookie."""
    client = httpx.Client(base_url=live.url)
    r = client.get(link(live, owner_jwt))
    assert r.status_code == 303 and r.headers["location"] == "/dashboard", r.text
    return client


def hook(live: LiveServer, owner_jwt: str, url: str) -> str:
    """A webhook endpoint of the owner's, in test, for ``payment.succeeded`` at ``url``."""
    r = httpx.post(
        f"{live.url}/webhooks",
        json={"url": url, "events": ["payment.succeeded"]},
        headers={
            "Authorization": f"Bearer {owner_jwt}",
            "Idempotency-Key": f"dashboard-hook-{url}",
            "X-Svc-Environment": "test",
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', html)
    assert found is not None, html
    return found.group(1)

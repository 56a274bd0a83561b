"""What every dashboard page shares (docs/dashboard.md): the session cookie and its owner,
the signed-in guard, the environment switch, CSRF-checked forms and the redirect back.

Kept apart from the pages so that each page module (``dashboard``, ``dashboard_money``)
uses one definition of who is signed in and which forms are accepted.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from sqlalchemy import Connection
from starlette.responses import RedirectResponse, Response

from ..domain import dashboard
from ..web import pages
from ..web.endpoint import Call
from . import dashboard_view as view

__all__ = [
    "COOKIE",
    "PATH",
    "back",
    "checked_form",
    "environment",
    "read",
    "secure",
    "signed_in",
    "signed_out",
    "write",
]

T = TypeVar("T")
COOKIE = "svc_dashboard"
PATH = "/dashboard"


async def read(call: Call, work: Callable[[Connection], T]) -> T:
    """``work`` in a read transaction, off the event loop."""

    def run() -> T:
        with call.ctx.db.read() as conn:
            return work(conn)

    return await anyio.to_thread.run_sync(run)


async def write(call: Call, work: Callable[[Connection], T]) -> T:
    """``work`` in a write transaction, off the event loop."""

    def run() -> T:
        with call.ctx.db.write() as conn:
            return work(conn)

    return await anyio.to_thread.run_sync(run)


def secure(call: Call) -> bool:
    """Whether the cookie is ``Secure``: in production, or behind an https public URL."""
    production = call.ctx.settings.env == "production"
    return production or urlsplit(call.public_url).scheme == "https"


async def _owner(call: Call) -> tuple[str, str] | None:
    """The session's owner and token, or ``None`` (no cookie, expired, signed out)."""
    session = call.request.cookies.get(COOKIE)
    if not session:
        return None
    now = call.now
    owner = await read(call, lambda conn: dashboard.session_owner(conn, session, now))
    return None if owner is None else (owner, session)


def signed_in(
    page: Callable[[Call, str, str], Awaitable[Response]],
) -> Callable[[Call], Awaitable[Response]]:
    """``page`` given the session's owner and token; a request with no live session gets
    the signed-out page instead."""

    @functools.wraps(page)
    async def served(call: Call) -> Response:
        signed = await _owner(call)
        if signed is None:
            return signed_out()
        return await page(call, *signed)

    return served


def signed_out() -> Response:
    """The page for a request without a live session: how to get a sign-in link."""
    return view.message(
        "Signed out",
        "Your dashboard session ended, or you have not signed in.",
        status=401,
        next_step="Run 'svc dashboard' (or POST /owners/me/dashboard-link) for a sign-in link.",
    )


def environment(call: Call, form: pages.Form | None = None) -> str:
    """The environment a page shows or a form acts in: ``test`` unless ``live`` is asked."""
    asked = form.get("environment") if form is not None else call.query.get("environment", "")
    return "live" if asked == "live" else "test"


async def checked_form(call: Call, session: str) -> pages.Form | Response:
    """The form when it comes from the dashboard's own page with the session's token."""
    if pages.cross_site(call):
        return view.message("Refused", "This form must be sent from its own page.", status=403)
    form = await pages.read_form(call)
    if form is None:
        return view.message("Refused", "The form could not be read; send it again.", status=400)
    if form.errors:  # hidden fields only: nothing for the person to fix but to reload
        problems = [f"{name}: {problem}" for name, problem in sorted(form.errors.items())]
        return view.message("Refused", *problems, status=422, next_step="Reload the page.")
    expected = dashboard.csrf_token(call.ctx, session)
    if not hmac.compare_digest(form.get("csrf").encode(), expected.encode()):
        return view.message(
            "Refused", "The form is out of date or not from this page; reload it.", status=403
        )
    return form


def back(path: str, environment: str, **query: str) -> Response:
    """A 303 to ``path`` in ``environment`` (the page a form was sent from)."""
    params = urlencode({"environment": environment, **query})
    return RedirectResponse(f"{path}?{params}", status_code=303, headers=pages.HEADERS)

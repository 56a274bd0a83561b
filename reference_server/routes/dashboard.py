"""The owner's dashboard (docs/dashboard.md): ``POST /owners/me/dashboard-link`` makes a
one-time sign-in link; ``/dashboard/login/{token}`` turns it into a session cookie; the
pages show sellers and sales, payments (with Refund) and webhooks (with Retry).

Pages read their owner from the session cookie only, and the environment from the
``environment`` query parameter (or form field): ``test`` unless ``live`` is asked for.
Every form is refused cross-site and carries a CSRF token bound to the session.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio.to_thread
from sqlalchemy import Connection
from starlette.responses import RedirectResponse, Response

from svc import DashboardLink

from ..domain import dashboard, refunds
from ..domain.errors import DomainError
from ..domain.paging import PageRequest
from ..outbox import claim_one, deliver_job_sync
from ..timeutil import as_utc
from ..web import pages
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint, Page
from ..web.responses import Reply
from ..web.sdk import Sdk
from . import dashboard_view as view
from .dashboard_session import COOKIE
from .dashboard_session import PATH as _PATH
from .dashboard_session import back as _back
from .dashboard_session import checked_form as _checked_form
from .dashboard_session import environment as _environment
from .dashboard_session import read as _read
from .dashboard_session import secure as _secure
from .dashboard_session import signed_in as _signed_in
from .dashboard_session import write as _write

__all__ = ["ENDPOINTS", "PAGES"]

_PAGE_SIZE = 50


def make_link(call: Call) -> Reply:
    """A one-time link that signs the owner in to the dashboard (good once, 10 minutes)."""
    token, expires = dashboard.create_link(call.conn, call.caller.owner_id, call.now)
    url = f"{call.public_url.rstrip('/')}/dashboard/login/{token}"
    return Reply(DashboardLink(url=url, expires_at=as_utc(expires)), 201, secret=True)


# --- sessions -------------------------------------------------------------------------------


async def login(call: Call) -> Response:
    """The one-time link: a session cookie, then the dashboard (a used link: 404)."""
    now = call.now
    session = await _write(call, lambda conn: dashboard.redeem(conn, call.params["token"], now))
    if session is None:
        return view.message(
            "Sign-in link not usable",
            "This link cannot be used: it expired, was already used, or never existed.",
            status=404,
            next_step="Run 'svc dashboard' for a new link.",
        )
    response = RedirectResponse(f"{_PATH}", status_code=303, headers=pages.HEADERS)
    response.set_cookie(
        COOKIE,
        session,
        max_age=int(dashboard.SESSION_TTL.total_seconds()),
        path=_PATH,
        secure=_secure(call),
        httponly=True,
        samesite="lax",
    )
    return response


# --- pages ----------------------------------------------------------------------------------


@_signed_in
async def overview(call: Call, owner: str, session: str) -> Response:
    """Sellers with their balances, and sales over the last 30 days by rail."""
    env, now = _environment(call), call.now

    def load(conn: Connection) -> dict[str, Any]:
        return {
            "sellers": [view.seller(s) for s in dashboard.seller_list(conn, owner, env)],
            "chart": view.chart(dashboard.sales_by_day(conn, owner, env, now)),
        }

    shown = await _read(call, load)
    return view.page(call, "dashboard.html", "Dashboard", env, session, **shown)


@_signed_in
async def payments(call: Call, owner: str, session: str) -> Response:
    """One seller's payments, newest first, 50 a page, with a Refund button."""
    env = _environment(call)
    after = call.query.get("starting_after") or None

    def load(conn: Connection) -> dict[str, Any] | None:
        sellers = dashboard.seller_list(conn, owner, env)
        chosen = call.query.get("seller") or (sellers[0].id if sellers else "")
        if chosen and dashboard.owned_seller(conn, owner, env, chosen) is None:
            return None
        if not chosen:
            return {"sellers": sellers, "seller": "", "rows": [], "has_more": False}
        request = PageRequest(limit=_PAGE_SIZE, starting_after=after)
        found = dashboard.payments(conn, env, chosen, request)
        available = dashboard.available(conn, env, chosen)
        rows = [view.payment(r, dashboard.refundable(r, available)) for r in found.rows]
        return {"sellers": sellers, "seller": chosen, "rows": rows, "has_more": found.has_more}

    try:
        shown = await _read(call, load)
    except DomainError:  # a cursor that names no payment of this seller
        return view.message("Not found", "That page of payments does not exist.", status=404)
    if shown is None:
        return view.message("Not found", "You have no such seller here.", status=404)
    return view.page(call, "dashboard_payments.html", "Payments", env, session, **shown)


@_signed_in
async def refund(call: Call, owner: str, session: str) -> Response:
    """Refund all that is left of a payment to one of the owner's sellers."""
    form = await _checked_form(call, session)
    if isinstance(form, Response):
        return form
    env, receipt_id, now = _environment(call, form), call.params["receipt_id"], call.now

    def run(conn: Connection) -> str | None:
        receipt = dashboard.owned_receipt(conn, owner, env, receipt_id)
        if receipt is None:
            return None
        refunds.refund(
            conn,
            seller_id=receipt.seller_id,
            environment=env,
            receipt_id=receipt_id,
            amount=None,
            reason="requested_by_customer",
            request_id=call.request_id,
            now=now,
            settings=call.ctx.settings,
        )
        return str(receipt.seller_id)

    try:
        seller = await _write(call, run)
    except DomainError as e:
        return view.message("Not refunded", e.message, status=409)
    if seller is None:
        return view.message("Not found", "You have no such payment here.", status=404)
    return _back(f"{_PATH}/payments", env, seller=seller)


@_signed_in
async def webhooks(call: Call, owner: str, session: str) -> Response:
    """Webhook endpoints with their latest deliveries, and Retry on a failed one."""
    env = _environment(call)
    found = await _read(call, lambda conn: dashboard.deliveries(conn, owner, env))
    endpoints = [view.endpoint(e, rows) for e, rows in found]
    return view.page(call, "dashboard_webhooks.html", "Webhooks", env, session, endpoints=endpoints)


@_signed_in
async def retry(call: Call, owner: str, session: str) -> Response:
    """Send one delivery again now (as ``POST /webhooks/{id}/deliveries/{id}/retry``)."""
    form = await _checked_form(call, session)
    if isinstance(form, Response):
        return form
    env, delivery_id, ctx, now = (
        _environment(call, form),
        call.params["delivery_id"],
        call.ctx,
        call.now,
    )
    lease = timedelta(seconds=ctx.settings.worker_lease_seconds)

    def claim(conn: Connection) -> Any:
        if not dashboard.owned_delivery(conn, owner, env, delivery_id):
            return None
        return claim_one(conn, ctx.box, delivery_id, now=now, lease=lease)

    try:
        job = await _write(call, claim)
    except DomainError as e:
        return view.message("Not sent", e.message, status=409)
    if job is None:
        return view.message("Not found", "You have no such delivery here.", status=404)
    await anyio.to_thread.run_sync(lambda: deliver_job_sync(ctx, job, trigger="retry"))
    return _back(f"{_PATH}/webhooks", env)


@_signed_in
async def sign_out(call: Call, _owner_id: str, session: str) -> Response:
    """End the session (its row and the cookie)."""
    form = await _checked_form(call, session)
    if isinstance(form, Response):
        return form
    await _write(call, lambda conn: dashboard.end_session(conn, session))
    response = view.message("Signed out", "You are signed out of the dashboard.")
    response.delete_cookie(COOKIE, path=_PATH, secure=_secure(call), httponly=True, samesite="lax")
    return response


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/owners/me/dashboard-link",
        handler=make_link,
        auth=Role.OWNER,
        sdk=Sdk(
            "owners.dashboard_link",
            doc="""A one-time link that signs the owner in to the dashboard: open it in a
            browser within 10 minutes; it works once.""",
        ),
        contract=Contract(response=DashboardLink, status=201),
    ),
]

PAGES = [
    Endpoint(
        method="GET", path="/dashboard/login/{token}", handler=login, page=Page(secret_path=True)
    ),
    Endpoint(method="GET", path=_PATH, handler=overview, page=Page()),
    Endpoint(method="GET", path=f"{_PATH}/payments", handler=payments, page=Page()),
    Endpoint(
        method="POST", path=f"{_PATH}/payments/{{receipt_id}}/refund", handler=refund, page=Page()
    ),
    Endpoint(method="GET", path=f"{_PATH}/webhooks", handler=webhooks, page=Page()),
    Endpoint(
        method="POST",
        path=f"{_PATH}/webhooks/deliveries/{{delivery_id}}/retry",
        handler=retry,
        page=Page(),
    ),
    Endpoint(method="POST", path=f"{_PATH}/sign-out", handler=sign_out, page=Page()),
]

"""The sandbox payout processor's pages, for humans: onboarding and the account's dashboard
(docs/payouts.md, "The sandbox processor's onboarding page").  Nothing but the onboarding
form completes an account; its one-time link's token is a secret path.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import anyio.to_thread
from starlette.responses import HTMLResponse, Response

from svc.money import format_micros

from ..context import ServerContext
from ..domain.errors import DomainError
from ..domain.payouts import sandbox
from ..web import pages
from ..web.endpoint import Call, Endpoint, Page

__all__ = ["ENDPOINTS"]

#: What a person who holds an unusable link can do: the link came from the seller's app
#: or agent, which can make a new one (the page speaks to the person, not to the API).
_ASK_AGAIN = "Ask whoever sent you this link (the seller's app or agent) for a new one."


def _message(
    call: Call,
    title: str,
    *lines: str,
    next_step: str,
    status: int = 200,
    requirements: Any = (),
) -> HTMLResponse:
    """A page that ends the visit: what happened, what to do now, and a way back."""
    return pages.render(
        "sandbox_message.html",
        status,
        title=title,
        lines=lines,
        requirements=list(requirements),
        next_step=next_step,
        back={"url": f"{call.public_url}/", "label": "Back to the service's home page"},
    )


def _unusable(call: Call) -> HTMLResponse:
    return _message(
        call,
        "Onboarding link not usable",
        "This link cannot be used: it expired, was already used, or never existed.",
        next_step=_ASK_AGAIN,
        status=404,
    )


def _refused(call: Call, line: str, status: int) -> HTMLResponse:
    return _message(
        call,
        "Refused",
        line,
        next_step="Open the link you were sent again, and fill in the form there.",
        status=status,
    )


def _csrf(ctx: ServerContext, token: str) -> str:
    """The form's CSRF token: bound to the link's token by a server secret."""
    key = ctx.secret("sandbox_connect_csrf").encode()
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


async def onboarding_page(call: Call) -> Response:
    """The onboarding form a human completes."""
    return await _form(call, call.params["token"], {}, {})


async def _form(
    call: Call, token: str, errors: dict[str, str], values: dict[str, Any], status: int = 200
) -> Response:
    def load() -> tuple[sandbox.OpenLink | None, str]:
        with call.ctx.db.read() as conn:
            link = sandbox.open_link(conn, token, kind="onboarding", now=call.ctx.now())
        return link, _csrf(call.ctx, token)

    link, csrf = await anyio.to_thread.run_sync(load)
    if link is None:
        return _unusable(call)
    return pages.render(
        "sandbox_onboard.html",
        status,
        title="Set up payouts",
        account=link.account,
        expires_at=link.expires_at.strftime("%Y-%m-%d %H:%M"),
        errors=errors,
        values=values,
        csrf=csrf,
        bank_accounts=sandbox.BANK_ACCOUNTS,
    )


async def submit_onboarding(call: Call) -> Response:
    """The onboarding form, sent: complete the account or leave requirements due."""
    token = call.params["token"]
    if pages.cross_site(call):
        return _refused(call, "This form must be sent from its own page.", 403)
    form = await pages.read_form(call)
    if form is None:
        return _refused(call, "The form could not be read; send it from its page.", 400)
    if form.errors:
        return await _form(call, token, form.errors, _shown(form), status=422)
    expected = await anyio.to_thread.run_sync(_csrf, call.ctx, token)
    # As bytes: compare_digest refuses str with non-ASCII characters (a 500).
    if not hmac.compare_digest(form.get("csrf").encode(), expected.encode()):
        return _refused(call, "The form is out of date or not from this page; reload it.", 403)
    complete = form.get("action") != "later"
    legal_name = form.get("legal_name", "").strip()[:200] or None
    bank = form.get("bank_account") or None
    tos = form.get("tos") == "accepted"

    def submit() -> dict[str, str] | None:
        with call.ctx.db.write() as conn:
            return sandbox.submit_onboarding(
                conn,
                token,
                legal_name=legal_name,
                bank_account=bank,
                tos_accepted=tos,
                complete=complete,
                now=call.ctx.now(),
            )

    try:
        errors = await anyio.to_thread.run_sync(submit)
    except DomainError:
        return _unusable(call)
    if errors:
        return await _form(call, token, errors, _shown(form), status=422)
    if complete:
        return _message(
            call,
            "Onboarding complete",
            "The payout account is complete. Payouts become ready at the seller's next sync.",
            next_step="Go back to the app or agent that sent you this link and tell it you are "
            "done: it turns payouts on from there. You can close this page.",
        )
    return _message(
        call,
        "Saved with requirements due",
        "What you entered is saved, but payouts stay off until the requirements below are met.",
        next_step="To finish, ask whoever sent you this link (the seller's app or agent) for "
        "a new onboarding link, and complete the form there.",
        requirements=_due(legal_name, bank, tos),
    )


def _shown(form: pages.Form) -> dict[str, Any]:
    """What the form shows again of what was sent (what the input boundary let through)."""
    return {
        "legal_name": form.get("legal_name").strip()[:200],
        "bank_account": form.get("bank_account") or None,
        "tos": form.get("tos") == "accepted",
    }


def _due(legal_name: str | None, bank: str | None, tos: bool) -> list[str]:
    given = {"legal_name": bool(legal_name), "external_account": bool(bank), "tos_acceptance": tos}
    return [r for r in sandbox.REQUIREMENTS if not given[r]] + [sandbox.VERIFICATION]


async def login_page(call: Call) -> Response:
    """The payout account's dashboard (a login link)."""
    token = call.params["token"]

    def load() -> tuple[sandbox.OpenLink | None, list[Any]]:
        with call.ctx.db.read() as conn:
            link = sandbox.open_link(conn, token, kind="login", now=call.ctx.now())
            return link, [] if link is None else sandbox.payouts_of(conn, link.account.id)

    link, payouts = await anyio.to_thread.run_sync(load)
    if link is None:
        return _message(
            call,
            "Login link not usable",
            "This link cannot be used: it expired or never existed.",
            next_step=_ASK_AGAIN,
            status=404,
        )
    rows = [
        {
            "id": p.id,
            "amount": format_micros(p.amount_micros),
            "status": p.status,
            "created_at": p.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        }
        for p in payouts
    ]
    bank = link.account.bank_account
    return pages.render(
        "sandbox_login.html",
        title="Payout account",
        account=link.account,
        bank=None if bank is None else f"{sandbox.BANK_ACCOUNTS[bank]} ({bank})",
        payouts=rows,
    )


_ONBOARD = "/sandbox/connect/onboard/{token}"
_LOGIN = "/sandbox/connect/login/{token}"

# A link's token opens an account's pages: a secret path, never in the access log.
ENDPOINTS = [
    Endpoint(method="GET", path=_ONBOARD, handler=onboarding_page, page=Page(secret_path=True)),
    Endpoint(method="POST", path=_ONBOARD, handler=submit_onboarding, page=Page(secret_path=True)),
    Endpoint(method="GET", path=_LOGIN, handler=login_page, page=Page(secret_path=True)),
]

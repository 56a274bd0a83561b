"""Approvals: ``GET /spend/approvals`` and ``/spend/approvals/{id}`` (the wallet key, or
its owner) and the page a person decides on, ``/approvals/{token}`` (docs/approvals.md).

The page is a one-time link: its token is a secret path (never in the access log), only
its hash is stored, and the form's CSRF token is bound to it, with the cross-site
refusal every page has.
"""

from __future__ import annotations

import hmac
from decimal import Decimal
from typing import Any

import anyio.to_thread
from sqlalchemy import Row, select
from starlette.responses import HTMLResponse, Response

from svc import Approval, ApprovalList
from svc.money import format_micros, to_micros

from ..domain import approvals, wallets
from ..store import tables as t
from ..web import pages
from ..web.auth import AnyCredential, Role
from ..web.endpoint import Call, Contract, Endpoint, Page
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import checked

__all__ = ["ENDPOINTS", "PAGES"]

_ASK_AGAIN = "Ask the agent (or whoever sent you this link) to make the request again."


def read(call: Call) -> Reply:
    """One approval: its status, amount and what it pays (the key's own, or its owner's)."""
    caller = call.caller
    if caller.role is Role.SELLER:
        raise ApiError(
            "wrong_credential", "Approvals are read with the wallet key, or its owner's JWT."
        )
    wallet = caller.role is Role.WALLET
    return Reply(
        approvals.get_for_caller(
            call.conn,
            call.ctx,
            call.params["approval_id"],
            environment=caller.environment,
            wallet_key_id=caller.subject_id if wallet else None,
            owner_id=None if wallet else caller.owner_id,
            public_url=call.public_url,
            now=call.now,
        )
    )


@paged
def list_all(call: Call, request: PageRequest) -> Reply:
    """The key's approvals, newest first (paged)."""
    return Reply(
        approvals.list_for_key(
            call.conn,
            call.ctx,
            request,
            wallet_key_id=checked(call.caller.subject_id),
            environment=call.caller.environment,
            public_url=call.public_url,
            now=call.now,
        )
    )


# --- the page -----------------------------------------------------------------------------


def _message(title: str, *lines: str, status: int = 200, next_step: str = "") -> HTMLResponse:
    return pages.render(
        "page_message.html", status, title=title, lines=list(lines), next_step=next_step
    )


def _unusable() -> HTMLResponse:
    return _message(
        "Approval link not usable",
        "This link cannot be used: it expired or never existed.",
        status=404,
        next_step=_ASK_AGAIN,
    )


def _already(row: Row[Any]) -> HTMLResponse:
    return _message(
        "Already decided",
        f"This payment of {format_micros(row.amount_micros)} USD was already decided: "
        f"{row.status}.",
        next_step="Nothing more to do here; you can close this page.",
    )


def _shown(conn: Any, row: Row[Any], now: Any) -> dict[str, Any]:
    """What the person sees: the key, what is bought (and from whom), the amount, and
    what the key's policy leaves."""
    key = wallets.get_wallet_key(conn, row.wallet_key_id)
    balance = wallets.spend_balance_model(conn, key, now)
    seller = None
    if row.resource_id is not None:
        r, s = t.resources, t.sellers
        seller = conn.execute(
            select(s.c.name).join(r, r.c.seller_id == s.c.id).where(r.c.id == row.resource_id)
        ).scalar()

    def shown(amount: Decimal | None) -> str | None:
        return None if amount is None else format_micros(to_micros(amount))

    return {
        "key_name": key.name or key.id,
        "what": row.url or row.resource_id,
        "method": row.method,
        "seller": seller or row.host,
        "amount": format_micros(row.amount_micros),
        "remaining_allowance": shown(balance.remaining_allowance),
        "remaining_budget": shown(balance.remaining_budget),
        "balance": shown(balance.balance),
        "expires_at": row.expires_at.strftime("%Y-%m-%d %H:%M UTC"),
    }


async def page(call: Call) -> Response:
    """The approval page: what the agent would pay, and Approve / Decline."""
    return await _page(call, {})


async def _page(call: Call, errors: dict[str, str], status: int = 200) -> Response:
    token = call.params["token"]

    def load() -> tuple[dict[str, Any] | None, Row[Any] | None, str]:
        now = call.ctx.now()
        with call.ctx.db.read() as conn:
            row = approvals.open_link(conn, token, now)
            if row is None:
                return None, approvals.decided(conn, token), ""
            return _shown(conn, row, now), row, approvals.csrf_token(call.ctx, token)

    shown, row, csrf = await anyio.to_thread.run_sync(load)
    if shown is None:
        return _unusable() if row is None or row.status == "pending" else _already(row)
    return pages.render(
        "approval.html", status, title="Approve a payment", csrf=csrf, errors=errors, **shown
    )


async def submit(call: Call) -> Response:
    """The person's decision (once; the first one wins)."""
    token = call.params["token"]
    if pages.cross_site(call):
        return _message("Refused", "This form must be sent from its own page.", status=403)
    form = await pages.read_form(call)
    if form is None:
        return _message("Refused", "The form could not be read; send it from its page.", status=400)
    if form.errors:  # the page again, saying what the input boundary held back
        return await _page(call, form.errors, status=422)
    expected = await anyio.to_thread.run_sync(approvals.csrf_token, call.ctx, token)
    if not hmac.compare_digest(form.get("csrf").encode(), expected.encode()):
        return _message(
            "Refused", "The form is out of date or not from this page; reload it.", status=403
        )
    decision = form.get("decision")
    if decision not in ("approve", "decline"):
        return _message("Refused", "Choose Approve or Decline on the page.", status=400)

    def decide() -> tuple[Row[Any] | None, Row[Any] | None]:
        with call.ctx.db.write() as conn:
            row = approvals.decide(conn, token, decision == "approve", call.ctx.now())
            return row, None if row is not None else approvals.decided(conn, token)

    row, known = await anyio.to_thread.run_sync(decide)
    if row is None:
        return _unusable() if known is None or known.status == "pending" else _already(known)
    done = "approved" if row.status == "approved" else "declined"
    return _message(
        f"Payment {done}",
        f"You {done} the payment of {format_micros(row.amount_micros)} USD.",
        next_step="The agent learns it when it asks again; you can close this page.",
    )


_PAGE = "/approvals/{token}"

ENDPOINTS = [
    Endpoint(
        method="GET",
        path="/spend/approvals",
        handler=list_all,
        auth=Role.WALLET,
        contract=Contract(response=ApprovalList),
        sdk=Sdk(
            "spend.approvals",
            doc="""The key's approvals (payments that wait or waited for a person), newest
            first.""",
            all_doc="""Every approval of the key, in the order of :meth:`approvals`.""",
        ),
    ),
    Endpoint(
        method="GET",
        path="/spend/approvals/{approval_id}",
        handler=read,
        auth=AnyCredential(roles=(Role.WALLET, Role.OWNER)),
        contract=Contract(response=Approval, errors=("not_found",)),
        sdk=Sdk(
            "spend.approval",
            "approval_id: str",
            doc="""One approval: ``pending`` (with ``approval_url``), ``approved``,
            ``declined``, ``expired`` or ``used`` (with ``receipt_id``).""",
        ),
    ),
]

# The link's token opens the page: a secret path, never in the access log.
PAGES = [
    Endpoint(method="GET", path=_PAGE, handler=page, page=Page(secret_path=True)),
    Endpoint(method="POST", path=_PAGE, handler=submit, page=Page(secret_path=True)),
]

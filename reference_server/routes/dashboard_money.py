"""The dashboard's money pages (docs/dashboard.md): wallet keys with their period spend,
payouts per seller (Connect set-up, withdrawals, Withdraw) and approvals waiting for a
person.

Each page reads through :mod:`..domain.dashboard_money`, scoped by the session's owner
and environment; each form is CSRF-checked (:func:`.dashboard_session.checked_form`) and
runs the same domain call as its API route.  Withdraw carries a one-time key rendered
into the form and claimed like an ``Idempotency-Key``, so a double submit withdraws once.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Row
from starlette.responses import RedirectResponse, Response

from svc.money import AmountError, format_amount, format_micros, parse_amount, to_micros

from ..domain import approvals, dashboard
from ..domain import dashboard_money as money
from ..domain.errors import DomainError
from ..domain.paging import PageRequest
from ..domain.payouts import PayoutProcessor, processor_for, withdrawals
from ..domain.payouts import connect as accounts
from ..processor import hosted_origin, uses_stripe
from ..timeutil import as_utc
from ..web import idempotency, pages
from ..web.endpoint import Call, Endpoint, Page
from . import dashboard_view as view
from .dashboard_session import PATH, back, checked_form, environment, read, signed_in, write

__all__ = ["PAGES"]

_PAGE_SIZE = 20
_COUNTRIES = ("US", "GB", "DE", "FR", "CA", "AU")


def _when(moment: datetime | None) -> str:
    return "" if moment is None else as_utc(moment).strftime("%Y-%m-%d %H:%M UTC")


def _usd(micros: int | None) -> str:
    return "" if micros is None else format_micros(int(micros))


def _key(row: Row[Any], now: datetime) -> dict[str, Any]:
    """A key as its page shows it: policy, and the period's spend as a meter's values."""
    spend = money.key_spend(row, now)
    hosts = list(row.allowed_hosts or [])
    return {
        "id": row.id,
        "name": row.name or row.id,
        "status": row.status,
        "prefix": row.key_prefix,
        "max_per_tx": _usd(row.max_per_tx_micros) or "no limit",
        "allowance": _usd(spend.allowance),
        "period": row.period,
        "budget": _usd(row.budget_micros) or "no limit",
        "spent_total": _usd(row.spent_total_micros),
        "hosts": ", ".join(hosts) if hosts else "any host",
        "approval_above": _usd(row.approval_above_micros),
        "approval_hosts": ", ".join(row.approval_hosts or []),
        "spent": _usd(spend.spent),
        "spent_value": spend.spent,
        "allowance_value": spend.allowance,
        "next_reset": _when(spend.next_reset),
    }


@signed_in
async def keys(call: Call, owner: str, session: str) -> Response:
    """The owner's wallet keys: policy, and the budget used this period as a meter."""
    env, now = environment(call), call.now
    rows = await read(call, lambda conn: money.wallet_keys(conn, owner, env))
    shown = [_key(r, now) for r in rows]
    return view.page(call, "dashboard_keys.html", "Wallet keys", env, session, keys=shown)


@signed_in
async def pending(call: Call, owner: str, session: str) -> Response:
    """Approvals waiting for a person, each linking to its own page where it is decided."""
    env, now, ctx, public = environment(call), call.now, call.ctx, call.public_url
    rows = await read(call, lambda conn: money.pending_approvals(conn, owner, env, now))
    shown = [
        {
            "id": r.id,
            "key": r.key_name or r.wallet_key_id,
            "amount": _usd(r.amount_micros),
            "what": r.host or r.url or r.resource_id or "",
            "method": r.method or "",
            "expires": _when(r.expires_at),
            "url": approvals.approval_url(ctx, public, r.id),
        }
        for r in rows
    ]
    return view.page(call, "dashboard_approvals.html", "Approvals", env, session, approvals=shown)


def _withdrawal(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "created_at": _when(row.created_at),
        "amount": _usd(row.amount_micros),
        "status": row.status,
        "final": row.status not in withdrawals.ACTIVE,
        "automatic": row.automatic,
        "failure_reason": row.failure_reason or "",
    }


@signed_in
async def payouts(call: Call, owner: str, session: str) -> Response:
    """One seller's payout account and withdrawals (newest first, paged), with the
    Connect set-up button and the Withdraw form."""
    env = environment(call)
    after = call.query.get("starting_after") or None
    minimum = call.ctx.settings.auto_payout_minimum_micros

    def load(conn: Connection) -> dict[str, Any] | None:
        sellers = dashboard.seller_list(conn, owner, env)
        chosen = call.query.get("seller") or (sellers[0].id if sellers else "")
        if not chosen:
            return {"sellers": sellers, "seller": "", "account": None, "rows": []}
        seller = dashboard.owned_seller(conn, owner, env, chosen)
        if seller is None:
            return None
        account = accounts.connect_model(seller, accounts.account_of(conn, chosen), minimum)
        found = money.withdrawals(conn, env, chosen, PageRequest(_PAGE_SIZE, after))
        return {
            "sellers": sellers,
            "seller": chosen,
            "account": account,
            "balance": next(
                (
                    format_amount(s.balance)
                    for s in sellers
                    if s.id == chosen and s.balance is not None
                ),
                None,
            ),
            "rows": [_withdrawal(r) for r in found.rows],
            "has_more": found.has_more,
        }

    try:
        shown = await read(call, load)
    except DomainError:  # a cursor that names no withdrawal of this seller
        return view.message("Not found", "That page of withdrawals does not exist.", status=404)
    if shown is None:
        return view.message("Not found", "You have no such seller here.", status=404)
    page = view.page(
        call,
        "dashboard_payouts.html",
        "Payouts",
        env,
        session,
        countries=_COUNTRIES,
        one_time=secrets.token_urlsafe(24),
        done=call.query.get("withdrawn", ""),
        **shown,
    )
    if uses_stripe(call.ctx.settings, env):  # Set up payouts answers with Stripe's page
        return pages.forms_may_go_to(page, hosted_origin(call.ctx.settings, "connect"))
    return page


_R = TypeVar("_R")


async def _act_on_seller(
    call: Call,
    owner: str,
    form: pages.Form,
    refused: str,
    act: Callable[[Connection, Row[Any], PayoutProcessor], _R],
) -> _R | Response:
    """``act`` on the owner's seller the path names, with its environment's processor, in
    one write transaction; a page saying why otherwise (no such seller of the owner's here,
    or the domain refused, titled ``refused``)."""
    env, seller_id = environment(call, form), call.params["seller_id"]
    settings, public = call.ctx.settings, call.public_url

    def run(conn: Connection) -> tuple[_R] | None:
        seller = dashboard.owned_seller(conn, owner, env, seller_id)
        if seller is None:
            return None
        return (act(conn, seller, processor_for(settings, env, public_url=public)),)

    try:
        done = await write(call, run)
    except DomainError as e:
        return view.message(
            refused, e.message, status=409, next_step="Go back to the payouts page."
        )
    if done is None:
        return view.message("Not found", "You have no such seller here.", status=404)
    return done[0]


@signed_in
async def onboard(call: Call, owner: str, session: str) -> Response:
    """Open the payout account (first time) and send the browser to a fresh onboarding
    link, as ``POST /sellers/{id}/connect/onboard`` does."""
    form = await checked_form(call, session)
    if isinstance(form, Response):
        return form
    country, now = form.get("country", "US").upper(), call.now

    def act(conn: Connection, seller: Row[Any], processor: PayoutProcessor) -> str:
        _, link = accounts.onboard(conn, seller, processor, country=country, type=None, now=now)
        return link.url

    url = await _act_on_seller(call, owner, form, "Payouts not set up", act)
    if isinstance(url, Response):
        return url
    return RedirectResponse(url, status_code=303, headers=pages.HEADERS)


@signed_in
async def sync(call: Call, owner: str, session: str) -> Response:
    """Read the payout account's readiness from the processor (``connect/sync``)."""
    form = await checked_form(call, session)
    if isinstance(form, Response):
        return form
    now = call.now

    def act(conn: Connection, seller: Row[Any], processor: PayoutProcessor) -> None:
        accounts.sync(conn, seller, processor, now=now)

    done = await _act_on_seller(call, owner, form, "Not refreshed", act)
    if isinstance(done, Response):
        return done
    return back(f"{PATH}/payouts", environment(call, form), seller=call.params["seller_id"])


def _amount(text: str) -> int | str | None:
    """The form's amount in micros (``None``: all that is available), or what is wrong."""
    text = text.strip()
    if not text:
        return None
    try:
        micros = to_micros(parse_amount(text))
    except AmountError as e:
        return f"Amount {e}."
    return micros if micros > 0 else "Amount must be more than 0."


@signed_in
async def withdraw(call: Call, owner: str, session: str) -> Response:
    """Withdraw from a seller's balance (as ``POST /sellers/{id}/withdraw``); the form's
    one-time key makes a second submit of the same form answer as the first did."""
    form = await checked_form(call, session)
    if isinstance(form, Response):
        return form
    env, now = environment(call, form), call.now
    amount = _amount(form.get("amount"))
    if isinstance(amount, str):
        return view.message("Not withdrawn", amount, status=422, next_step="Go back and fix it.")
    key = form.get("key")
    if not key or len(key) > 255:
        return view.message("Refused", "The form is out of date; reload it.", status=422)
    settings, box = call.ctx.settings, call.ctx.box
    want = idempotency.KeyClaim(
        scope=f"dashboard:{owner}",
        route="dashboard.withdraw",
        key=key,
        fingerprint=idempotency.request_fingerprint(
            "POST", call.request.url.path, {"amount": amount, "environment": env}
        ),
        now=now,
        ttl=timedelta(seconds=settings.idempotency_ttl_seconds),
        lease=timedelta(seconds=settings.idempotency_lease_seconds),
    )

    def act(conn: Connection, seller: Row[Any], processor: PayoutProcessor) -> str:
        claimed = idempotency.claim(conn, want, box)
        if isinstance(claimed, idempotency.Replay):
            return str(claimed.body["withdrawal_id"])
        row = withdrawals.withdraw(
            conn,
            seller,
            amount=amount,
            processor=processor.name,
            request_id=call.request_id,
            now=now,
            unit_micros=processor.unit_micros,
        )
        idempotency.complete(conn, claimed, 201, {"withdrawal_id": row.id})
        return str(row.id)

    withdrawal_id = await _act_on_seller(call, owner, form, "Not withdrawn", act)
    if isinstance(withdrawal_id, Response):
        return withdrawal_id
    return back(f"{PATH}/payouts", env, seller=call.params["seller_id"], withdrawn=withdrawal_id)


PAGES = [
    Endpoint(method="GET", path=f"{PATH}/keys", handler=keys, page=Page()),
    Endpoint(method="GET", path=f"{PATH}/payouts", handler=payouts, page=Page()),
    Endpoint(
        method="POST", path=f"{PATH}/payouts/{{seller_id}}/onboard", handler=onboard, page=Page()
    ),
    Endpoint(method="POST", path=f"{PATH}/payouts/{{seller_id}}/sync", handler=sync, page=Page()),
    Endpoint(
        method="POST", path=f"{PATH}/payouts/{{seller_id}}/withdraw", handler=withdraw, page=Page()
    ),
    Endpoint(method="GET", path=f"{PATH}/approvals", handler=pending, page=Page()),
]

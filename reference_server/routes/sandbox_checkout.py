"""The sandbox's checkout page for a card top-up in ``test`` (``/top-ups/{top_up_id}/pay``):
the ``checkout_url`` of a pending card top-up there, as the processor's Checkout is in
``live``, so card top-ups are one flow in both environments (docs/wallets.md).

An approved test card credits the top-up through the same booking as the processor's
``checkout.session.completed`` (:func:`~reference_server.domain.top_ups.book_card`).  The
top-up id in the address is the capability (as a Checkout URL is).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from sqlalchemy import Row, select
from starlette.responses import RedirectResponse, Response

from svc.money import format_micros

from ..domain import card_payments, top_ups
from ..domain.events import writing
from ..ids import new_id
from ..store import tables as t
from ..web import pages
from ..web.endpoint import Call, Endpoint, Page

__all__ = ["ENDPOINTS", "checkout_url"]

_PATH = "/top-ups/{top_up_id}/pay"


def checkout_url(public_url: str, top_up_id: str) -> str:
    """Where a pending card top-up in ``test`` is paid."""
    return f"{public_url}/top-ups/{top_up_id}/pay"


def _load(call: Call) -> Row[Any] | None:
    tu = t.top_ups
    with call.ctx.db.read() as conn:
        row = conn.execute(select(tu).where(tu.c.id == call.params["top_up_id"])).first()
    if row is None or row.environment != "test" or row.rail != top_ups.CARD:
        return None
    return row


def _done(call: Call, row: Row[Any]) -> Response:
    return RedirectResponse(f"{call.public_url}/top-ups/{row.id}/done", 303, headers=pages.HEADERS)


def _form(
    row: Row[Any],
    *,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    notice: str | None = None,
    status: int = 200,
) -> Response:
    return pages.render(
        "sandbox_checkout.html",
        status,
        title="Top up your account wallet",
        price=format_micros(int(row.amount_micros)),
        token="",
        errors=errors or {},
        values=values or {},
        notice=notice,
    )


def _not_found() -> Response:
    return pages.message(404, "Top-up not found", "No such card top-up.")


async def page(call: Call) -> Response:
    row = await anyio.to_thread.run_sync(_load, call)
    if row is None:
        return _not_found()
    if row.status == "succeeded":
        return _done(call, row)
    return _form(row)


async def pay(call: Call) -> Response:
    if pages.cross_site(call):
        return pages.message(403, "Refused", "Send this form from its own page.")
    form = await pages.read_form(call)
    row = await anyio.to_thread.run_sync(_load, call)
    if row is None:
        return _not_found()
    if form is None:
        return _form(row, notice="The form could not be read; send it again.", status=400)
    shown = {"number": form.get("number")[:40], "expiry": form.get("expiry")[:10]}
    if form.errors:
        return _form(row, errors=form.errors, values=shown, status=422)
    card, errors = card_payments.check_card(
        form.get("number"), form.get("expiry"), form.get("cvc"), now=call.now
    )
    if card is None:
        return _form(row, errors=errors, values=shown, status=422)
    outcome = card_payments.sandbox_outcome(card)
    ending = card.number[-4:]
    shown = {**shown, "number": ""}
    if outcome == "declined":
        notice = (
            f"The card ending in {ending} was declined, and nothing was charged. Enter "
            "another card. (In the sandbox, 4000 0000 0000 0002 is always declined.)"
        )
        return _form(row, values=shown, notice=notice, status=402)
    if outcome == "unknown":
        errors = {
            "number": f"The card ending in {ending} is not a sandbox test card, and nothing "
            "was charged: 4242 4242 4242 4242 pays, 4000 0000 0000 0002 is declined."
        }
        return _form(row, errors=errors, values=shown, status=422)
    await anyio.to_thread.run_sync(_book, call, row)
    return _done(call, row)


def _book(call: Call, row: Row[Any]) -> None:
    """Credit it (once: a second submit finds it credited); a made-up PaymentIntent id,
    as the sandbox processor's card sales have."""
    ctx = call.ctx
    with writing(ctx.db, ctx.notify_new_events) as conn:
        top_ups.book_card(conn, row.id, payment_intent=new_id("pi"), now=ctx.now())


ENDPOINTS = [
    Endpoint(method="GET", path=_PATH, handler=page, page=Page()),
    Endpoint(method="POST", path=_PATH, handler=pay, page=Page()),
]

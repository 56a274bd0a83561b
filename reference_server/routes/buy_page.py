"""Every resource's buy page, where a person pays by card: ``pay_url`` (``/buy/{short_id}``),
server-rendered HTML (docs/buy-page.md says what it shows and does, live and in ``test``).

A form carries a one-time payment token, signed and bound to the resource: it is also the
form's CSRF token, and its nonce is the payment's idempotency key, so a second submit of
the same form shows the same receipt and pays nothing more.  A token lives an hour, never
longer than its record is kept.  The old ``/pay/{short_id}`` paths answer ``308`` here.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import attrs
from sqlalchemy import Row, select
from starlette.responses import RedirectResponse, Response

from svc.money import format_micros

from ..domain import card_payments
from ..domain.errors import DomainError
from ..domain.events import writing
from ..domain.resources import fixed_price_micros
from ..processor import checkout, hosted_origin, uses_stripe
from ..settings import Settings
from ..store import tables as t
from ..web import idempotency, pages
from ..web.endpoint import RAW_BODY, Call, Contract, Endpoint, Flow, Page
from ..web.errors import ApiError

__all__ = ["ENDPOINTS"]

_PATH = "/buy/{short_id}"
#: Where the page was first served: its paths answer a redirect to ``_PATH``'s.
_OLD_PATH = "/pay/{short_id}"
#: The name its tokens, idempotency records (route ``POST _OLD_PATH``) and Checkout ids are
#: signed and stored under, kept from ``/pay/...``: a form opened before the move pays once.
_STORED = "pay_page"
#: How long a form's payment token may be used.
_TOKEN_SECONDS = 3600
#: How long a second submit waits for the first one's answer before saying so.
_WAIT_SECONDS = 10.0


@attrs.frozen
class _Sale:
    """What the page shows of a resource."""

    resource: Row[Any]
    seller_name: str
    settings: Settings
    #: Paid at the processor's Checkout (live with ``SVC_PROCESSOR=stripe``).
    checkout: bool = False

    @property
    def description(self) -> str:
        r = self.resource
        return str(r.description or (r.path if r.kind == "http" else r.tool))

    @property
    def price_micros(self) -> int | None:
        """What a card pays (``resources.fixed_price_micros``): ``None``, a metered
        resource without a fallback price, is not sold by card."""
        return fixed_price_micros(self.resource)

    @property
    def card_problem(self) -> str | None:
        """Why a card cannot be charged this price (fractions of a cent, under 0.50)."""
        try:
            checkout.cents(self.price_micros or 0)
        except DomainError as exc:
            return exc.message
        return None

    @property
    def values(self) -> dict[str, Any]:
        r = self.resource
        return {
            "checkout": self.checkout,
            "card_problem": self.card_problem if self.checkout else None,
            "description": self.description,
            "price": format_micros(self.price_micros or 0),
            "seller": self.seller_name,
            "environment": r.environment,
            "short_id": r.short_id,
        }


def _load(call: Call) -> _Sale | None:
    short_id = call.params["short_id"]
    r, s = t.resources, t.sellers
    with call.ctx.db.read() as conn:
        row = conn.execute(select(r).where(r.c.short_id == short_id)).first()
        if row is None:
            return None
        name = conn.execute(select(s.c.name).where(s.c.id == row.seller_id)).scalar()
    paid_at_processor = uses_stripe(call.ctx.settings, row.environment)
    return _Sale(
        resource=row,
        seller_name=name or row.seller_id,
        settings=call.ctx.settings,
        checkout=paid_at_processor,
    )


def _key(call: Call) -> bytes:
    return call.ctx.secret(f"{_STORED}_token").encode()


def _sign(key: bytes, short_id: str, nonce: str, expires: int) -> str:
    message = f"{short_id}\n{nonce}\n{expires}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _new_token(call: Call, short_id: str) -> str:
    nonce = secrets.token_urlsafe(16)
    # Never longer than its idempotency record is kept: an expired token pays nothing.
    lifetime = min(_TOKEN_SECONDS, call.ctx.settings.idempotency_ttl_seconds)
    expires = int((call.now + timedelta(seconds=lifetime)).timestamp())
    return f"{nonce}.{expires}.{_sign(_key(call), short_id, nonce, expires)}"


@attrs.frozen
class _Token:
    nonce: str
    expired: bool


def _read_token(call: Call, short_id: str, token: str) -> _Token | None:
    """The token's nonce, if this server signed it for this resource."""
    nonce, _, rest = token.partition(".")
    expires_text, _, signature = rest.partition(".")
    if not nonce or not (expires_text.isascii() and expires_text.isdigit()) or len(token) > 200:
        return None
    expected = _sign(_key(call), short_id, nonce, int(expires_text))
    # As bytes: compare_digest refuses str with non-ASCII characters (a 500).
    if not hmac.compare_digest(signature.encode(), expected.encode()):
        return None
    return _Token(nonce=nonce, expired=int(expires_text) <= int(call.now.timestamp()))


def _not_found() -> Response:
    return pages.message(
        404,
        "Payment page not found",
        "There is no payment page at this address. Check the link you were given, "
        "or ask the seller for a new one.",
    )


def _gone(sale: _Sale) -> Response:
    return pages.message(
        410,
        "No longer for sale",
        f"{sale.seller_name} has deactivated this item, so it can no longer be paid for "
        "here. Nothing was charged. Ask the seller if it is offered elsewhere.",
    )


def _metered(sale: _Sale, status: int) -> Response:
    return pages.message(
        status,
        "Not sold by card",
        f"{sale.seller_name} prices this item by use, and sets no fixed price for a card: "
        "it cannot be bought by card here. Nothing was charged. An agent pays it from its "
        "wallet key, or at the seller's own gate.",
    )


def _refused(message: str, status: int) -> Response:
    return pages.message(status, "Refused", message)


async def buy_page(call: Call) -> Response:
    """The buy page: what is sold, and in ``test`` the sandbox card form."""
    sale = await _payable(call, unpayable_status=200)  # live: no card processor, no form
    if not isinstance(sale, _Sale):
        return sale
    token = await anyio.to_thread.run_sync(_new_token, call, sale.resource.short_id)
    return _form(sale, token)


def _form(
    sale: _Sale,
    token: str,
    *,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    notice: str | None = None,
    status: int = 200,
) -> Response:
    title = f"Pay {sale.seller_name}"
    page = pages.render(
        "buy_page.html",
        status,
        title=title,
        sale=sale.values,
        token=token,
        errors=errors or {},
        values=values or {},
        notice=notice,
    )
    if sale.checkout:
        return pages.forms_may_go_to(page, hosted_origin(sale.settings, "checkout"))
    return page


async def pay(call: Call) -> Response:
    """The card form, sent: pay once, and show the receipt."""
    if pages.cross_site(call):
        return _refused("This form must be sent from its own page.", 403)
    form = await pages.read_form(call)
    if form is None:
        return _refused("The form could not be read; send it from the payment page.", 400)
    sale = await _payable(call)
    if isinstance(sale, Response):
        return sale
    short_id = sale.resource.short_id
    if form.errors:
        return await _held_back(call, sale, form)
    token = await anyio.to_thread.run_sync(_read_token, call, short_id, form.get("token", ""))
    if token is None:
        return _refused("This form is out of date or not from this page: reload the page.", 403)
    outcome = await _claim(call, sale, token)
    if isinstance(outcome, Response):
        return outcome
    begun = outcome
    values = _shown(form)
    try:
        if sale.checkout:
            answer = await _checkout(call, sale, token, begun)
        else:
            answer = await _charge(call, sale, token, begun, form, values)
    except BaseException:
        await anyio.to_thread.run_sync(idempotency.release, call.ctx.db, begun)
        raise
    if isinstance(answer, Response):
        await anyio.to_thread.run_sync(idempotency.release, call.ctx.db, begun)
        return answer
    return _answer(call, sale, answer)


async def _payable(call: Call, *, unpayable_status: int = 409) -> _Sale | Response:
    """What the page sells by card; or the page's answer when it sells nothing by card
    (unknown, deactivated, or in live, shown without a form with ``unpayable_status``)."""
    sale = await anyio.to_thread.run_sync(_load, call)
    if sale is None:
        return _not_found()
    if not sale.resource.active:
        return _gone(sale)
    if sale.price_micros is None:
        return _metered(sale, unpayable_status)
    if sale.resource.environment != "test" and not sale.checkout:
        return _form(sale, "", status=unpayable_status)
    return sale


def _shown(form: pages.Form) -> dict[str, str]:
    """What the form shows again of what was sent (never the CVC)."""
    return {"number": form.get("number")[:40], "expiry": form.get("expiry")[:10]}


async def _held_back(call: Call, sale: _Sale, form: pages.Form) -> Response:
    """The form again, saying which entries the input boundary held back; nothing is
    paid.  Its token is kept while it is still good (else a fresh one, as a reload gets)."""
    short_id = sale.resource.short_id
    token = form.get("token")
    read = await anyio.to_thread.run_sync(_read_token, call, short_id, token)
    if read is None or read.expired:
        token = await anyio.to_thread.run_sync(_new_token, call, short_id)
    return _form(sale, token, errors=form.errors, values=_shown(form), status=422)


async def _claim(call: Call, sale: _Sale, token: _Token) -> idempotency.Begun | Response:
    """The token's idempotency record claimed; or the receipt it already paid (waiting
    a little while another submit of the same form is still paying)."""
    ctx = call.ctx
    fingerprint = idempotency.request_fingerprint(
        "POST", _OLD_PATH, {"short_id": sale.resource.short_id}
    )
    waited = 0.0
    while True:
        try:
            begun = await anyio.to_thread.run_sync(
                lambda: idempotency.begin(
                    ctx.db,
                    scope=f"{_STORED}:{sale.resource.id}",
                    route=f"POST {_OLD_PATH}",
                    key=token.nonce,
                    fingerprint=fingerprint,
                    now=ctx.now(),
                    ttl=timedelta(seconds=ctx.settings.idempotency_ttl_seconds),
                    lease=timedelta(seconds=ctx.settings.idempotency_lease_seconds),
                    box=ctx.box,
                )
            )
        except ApiError as exc:
            if exc.code != "idempotency_in_progress":
                raise
            if waited >= _WAIT_SECONDS:
                return pages.message(
                    409,
                    "Payment in progress",
                    "This payment is still being processed. Reload this page in a "
                    "moment to see its receipt; you will not be charged twice.",
                )
            await anyio.sleep(0.1)
            waited += 0.1
            continue
        if isinstance(begun, idempotency.Replay):
            return _answer(call, sale, begun.body)
        return begun


async def _charge(
    call: Call,
    sale: _Sale,
    token: _Token,
    begun: idempotency.Begun,
    form: pages.Form,
    values: dict[str, str],
) -> dict[str, Any] | Response:
    """The sandbox processor's answer, and an approved payment booked: the receipt's
    answer, or the form again saying what to fix."""
    if token.expired:
        fresh = await anyio.to_thread.run_sync(_new_token, call, sale.resource.short_id)
        notice = (
            "This form had expired, and nothing was charged. Check the details and press Pay again."
        )
        return _form(sale, fresh, values=values, notice=notice, status=422)
    card, errors = card_payments.check_card(
        form.get("number", ""), form.get("expiry", ""), form.get("cvc", ""), now=call.now
    )
    again = form.get("token", "")
    if card is None:
        return _form(sale, again, errors=errors, values=values, status=422)
    outcome = card_payments.sandbox_outcome(card)
    # A card the processor refused is named by its last four digits only, and its number
    # is not put back in the form: the page is not a place to keep a card number.
    ending = card.number[-4:]
    values = {**values, "number": ""}
    if outcome == "declined":
        notice = (
            f"The card ending in {ending} was declined, and nothing was charged. Enter "
            "another card. (In the sandbox, 4000 0000 0000 0002 is always declined.)"
        )
        return _form(sale, again, values=values, notice=notice, status=402)
    if outcome == "unknown":
        errors = {
            "number": f"The card ending in {ending} is not a sandbox test card, and nothing "
            "was charged. This sandbox takes only its test cards: 4242 4242 4242 4242 pays, "
            "4000 0000 0000 0002 is declined. No real card is charged here."
        }
        return _form(sale, again, errors=errors, values=values, status=422)
    return await anyio.to_thread.run_sync(_book, call, sale, begun)


def _book(call: Call, sale: _Sale, begun: idempotency.Begun) -> dict[str, Any] | Response:
    ctx = call.ctx
    r = t.resources
    with writing(ctx.db, ctx.notify_new_events) as conn:
        query = select(r).where(r.c.id == sale.resource.id)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update()
        resource = conn.execute(query).one()
        if not resource.active:
            return _gone(sale)
        now = ctx.now()
        receipt_id = card_payments.book_card_sale(
            conn,
            resource=resource,
            fee_bps=ctx.settings.platform_fee_bps,
            request_id=call.request_id,
            now=now,
        )
        answer = _paid(receipt_id, fixed_price_micros(resource) or 0, now)
        idempotency.complete(conn, begun, 200, answer)
    return answer


async def _checkout(
    call: Call, sale: _Sale, token: _Token, begun: idempotency.Begun
) -> dict[str, Any] | Response:
    """The processor's Checkout opened for this form (its nonce names the session: a
    second submit gets the same one); the answer to keep is where to send the payer."""
    if token.expired:
        fresh = await anyio.to_thread.run_sync(_new_token, call, sale.resource.short_id)
        notice = "This page had expired, and nothing was charged. Press Pay with card again."
        return _form(sale, fresh, notice=notice, status=422)
    if sale.card_problem is not None:
        return _refused(sale.card_problem + " Nothing was charged.", 422)
    r, base = sale.resource, f"{call.public_url}/buy/{sale.resource.short_id}"
    opened = checkout.Checkout(
        id=checkout.checkout_id(f"{_STORED}:{r.id}", token.nonce),
        kind=checkout.SALE,
        environment=r.environment,
        amount_micros=sale.price_micros or 0,
        name=f"{sale.description} ({sale.seller_name})",
        success_url=base + "/done?session={CHECKOUT_SESSION_ID}",
        cancel_url=base,
        resource_id=r.id,
    )
    ctx = call.ctx

    def start() -> dict[str, Any]:
        with ctx.db.write() as conn:
            checkout.prepare(conn, opened, ctx.now())
        url = checkout.open_session(ctx.db, ctx.settings, opened, ctx.now())
        answer = {"checkout_url": url}
        with ctx.db.write() as conn:
            idempotency.complete(conn, begun, 303, answer)
        return answer

    try:
        return await anyio.to_thread.run_sync(start)
    except DomainError as exc:
        return pages.message(
            503,
            "Card payment unavailable",
            exc.message,
            "Go back to the payment page and try again in a moment.",
        )


def _answer(call: Call, sale: _Sale, answer: dict[str, Any]) -> Response:
    """A kept answer: the payer sent on to the processor's Checkout, or the receipt."""
    if "checkout_url" in answer:
        return RedirectResponse(answer["checkout_url"], 303, headers=pages.HEADERS)
    return _receipt(call, sale, answer)


async def done(call: Call) -> Response:
    """Where the processor's Checkout sends the payer back: the receipt once the
    processor's ``checkout.session.completed`` booked it, else what is happening."""
    sale = await anyio.to_thread.run_sync(_load, call)
    if sale is None:
        return _not_found()
    session_id = call.request.query_params.get("session", "")[:255]
    row = await anyio.to_thread.run_sync(_session_receipt, call, session_id)
    if row is None or row.resource_id != sale.resource.id:
        return pages.message(
            404,
            "Payment not found",
            "This page knows no such card payment. Check the link, or pay again.",
        )
    if row.receipt_id is not None:
        return _receipt(call, sale, _paid(row.receipt_id, row.amount_micros, row.paid_at))
    lines = {
        "expired": ["This card payment was not completed, and nothing was charged."],
        "failed": [
            f"The card was declined ({row.failure_reason}), and nothing was charged.",
            "Go back to the payment page to try another card.",
        ],
    }.get(
        row.status,
        [
            "Payment received, confirming with the card processor… "
            "Reload this page in a few seconds to see your receipt.",
            "You will not be charged twice.",
        ],
    )
    return pages.message(200, "Confirming your payment", *lines)


def _session_receipt(call: Call, session_id: str) -> Row[Any] | None:
    cc, rc = t.card_checkouts, t.receipts
    with call.ctx.db.read() as conn:
        return conn.execute(
            select(cc, rc.c.created_at.label("paid_at"))
            .select_from(cc.outerjoin(rc, rc.c.id == cc.c.receipt_id))
            .where(cc.c.session_id == session_id, cc.c.kind == checkout.SALE)
        ).first()


def _paid(receipt_id: str, amount_micros: int, at: datetime) -> dict[str, Any]:
    """A card payment's answer, as kept under its form's key and shown on the receipt."""
    return {
        "receipt_id": receipt_id,
        "amount": format_micros(int(amount_micros)),
        "created_at": at.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _receipt(call: Call, sale: _Sale, answer: dict[str, Any]) -> Response:
    return pages.render(
        "buy_receipt.html",
        200,
        title="Payment received",
        sale=sale.values,
        receipt_id=answer["receipt_id"],
        amount=answer["amount"],
        paid_at=answer["created_at"],
        next_step=(
            f"Keep this receipt id: it is your proof of payment. Give it to {sale.seller_name} "
            "where they ask for a receipt, and it unlocks what you paid for."
        ),
        back={
            "url": f"{call.public_url}/buy/{sale.resource.short_id}",
            "label": "Back to the payment page",
        },
    )


async def moved(call: Call) -> Response:
    """An old ``/pay/{short_id}...`` address: ``308`` to its ``/buy/`` twin, relative (never
    naming the ``Host`` the client chose), the query kept; a POST is resent there."""
    path = str(call.request.scope["path"])
    before, _, after = path.partition("/pay/")
    location = quote(f"{before}/buy/{after}", safe="/:@!$&'()*+,;=~")
    query = call.request.scope.get("query_string", b"").decode("latin-1")
    return RedirectResponse(location + (f"?{query}" if query else ""), 308, headers=pages.HEADERS)


ENDPOINTS = [
    Endpoint(method="GET", path=_PATH, handler=buy_page, page=Page()),
    Endpoint(method="POST", path=_PATH, handler=pay, page=Page()),
    Endpoint(method="GET", path=_PATH + "/done", handler=done, page=Page()),
    # Redirects, not pages: they answer no HTML of their own.
    *(
        Endpoint(
            method=method,
            path=path,
            handler=moved,
            run=Flow(),
            body=RAW_BODY if method == "POST" else None,
            contract=Contract(listed=False),
        )
        for method, path in (("GET", _OLD_PATH), ("POST", _OLD_PATH), ("GET", _OLD_PATH + "/done"))
    ),
]

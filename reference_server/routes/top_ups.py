"""Top-ups (owner JWT): pay the account wallet from the owner's own wallet.

The payment is the open rails' own charge (:func:`open_rails.pay_service`), paying the
environment's deposit address: ``test`` on the sandbox chain, ``live`` through the
configured facilitator.  The create handler is async (settling awaits a facilitator,
which must not hold a transaction); its first step claims the ``Idempotency-Key`` in the
one store (:mod:`reference_server.web.idempotency`), and the top-up references its
record: the same key answers the same top-up, never a second payment.

``method`` ``card`` answers at once with a ``pending`` top-up and its ``checkout_url``
(the processor's Checkout in live, the sandbox card form of :mod:`.sandbox_checkout` in
``test``: one flow in both); it is credited when the processor confirms the payment
(:mod:`reference_server.processor.checkout`).
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
import attrs
from sqlalchemy import Connection, Row, select
from sqlalchemy.exc import IntegrityError
from starlette.responses import Response

from svc import TopUp, TopUpList
from svc.bodies import CreateTopUp
from svc.money import format_micros, to_micros
from svc.receipts import rail_credentials
from svc_asgi import RailRequest

from ..context import ServerContext
from ..domain import open_rails, top_ups
from ..domain.errors import DomainError
from ..invariant import InvariantError
from ..processor import checkout, uses_stripe
from ..store import tables as t
from ..web import idempotency, pages, paging
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint, Flow, Page
from ..web.errors import ApiError, settlement_unavailable
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import checked
from . import sandbox_checkout

__all__ = ["ENDPOINTS", "PAGES"]

PATH = "/owners/me/top-ups"


async def create(call: Call) -> Reply:
    """Top up the account wallet: 402 with the x402/MPP challenges for the amount, paying
    the environment's deposit address; retried with the credential, 201 once settled.
    ``method: card``: 201 at once, a pending top-up paid at its ``checkout_url``."""
    started: _Started = call.started
    if started.row is not None and started.row.rail == top_ups.CARD:
        return await _card(call, started.row, started.replayed)
    if started.row is not None:
        return Reply(top_ups.top_up_model(started.row), 201, headers=_REPLAYED)
    try:
        return await _pay(call, started)
    except Exception:
        if started.record is not None:  # not booked: a retry of the key may run
            await anyio.to_thread.run_sync(_release, call.ctx, started.record)
        raise


_REPLAYED = {"Idempotent-Replayed": "true"}


@attrs.frozen(kw_only=True)
class _Started:
    """What the first step found or made: the top-up to answer (``replayed``: its key
    made it before), or the terms to pay and the key's record to book it under."""

    row: Row[Any] | None = None
    replayed: bool = False
    terms: open_rails.RailTerms | None = None
    record: idempotency.Begun | None = None


def _start(call: Call) -> _Started:
    """In the transaction that authenticated the owner: the request checked, its
    ``Idempotency-Key`` claimed in the one store (kept for good: the top-up it makes
    references it, and is its answer, the record left in flight with its lease lapsed),
    and the top-up the key made already found, or a card top-up opened."""
    ctx, env, conn = call.ctx, call.environment, call.conn
    amount = to_micros(call.input(CreateTopUp).amount)  # > 0: the body reader's amount rule
    card, terms = call.input(CreateTopUp).method == top_ups.CARD, None
    if card and env != "test" and not uses_stripe(ctx.settings, env):
        raise ApiError(
            "top_ups_unavailable",
            "Card top-ups in live need the card processor (SVC_PROCESSOR=stripe and its keys).",
        )
    elif card:
        checkout.cents(amount)
    elif (terms := open_rails.service_terms(ctx, env)) is None:
        raise ApiError(
            "top_ups_unavailable",
            "Top-ups in live need SVC_LIVE_FACILITATOR_URL and SVC_LIVE_DEPOSIT_ADDRESS "
            "(and the rails extra).",
        )
    record = None
    if call.key is not None:
        want = attrs.evolve(call.key, fingerprint=top_ups.fingerprint(amount, card=card), ttl=None)
        claimed = idempotency.claim(conn, want, ctx.box)
        if isinstance(claimed, idempotency.Replay):
            raise InvariantError("a top-up's key record is never completed")
        record = claimed
        found = top_ups.find_by_record(
            conn, record.record_id, owner_id=call.caller.owner_id, environment=env
        )
        if found is not None or card:
            idempotency.lapse(conn, record)
        if found is not None:
            return _Started(row=found, replayed=True)
    if card:
        row = top_ups.open_card(
            conn,
            owner_id=call.caller.owner_id,
            environment=env,
            amount=amount,
            record_id=None if record is None else record.record_id,
            request_id=call.request_id,
            now=ctx.now(),
        )
        return _Started(row=row)
    return _Started(terms=terms, record=record)


async def _pay(call: Call, started: _Started) -> Reply:
    """The 402 challenge, or the credential settled and the top-up booked."""
    owner_id, env, terms = call.caller.owner_id, call.environment, checked(started.terms)
    amount = to_micros(call.input(CreateTopUp).amount)
    charge: dict[str, Any] = {
        "realm": urlsplit(call.public_url).netloc,
        "amount_micros": amount,
        # Signed into MPP's challenge id, echoed by x402: a credential pays this owner only.
        "binding": {"top_up_for": owner_id},
    }
    request = RailRequest("POST", call.public_url + call.request.url.path)
    if not rail_credentials(call.headers):
        headers = await open_rails.service_challenge(call.ctx, terms, request, **charge)
        raise ApiError(
            "payment_required",
            f"Pay {format_micros(amount)} USDC to top up; retry with the credential.",
            headers=dict(headers),
        )
    record = started.record

    def book(conn: Connection, settled: open_rails.Settled) -> Row[Any]:
        """Book the settled top-up in the transaction that records the settlement; the
        key's record is left to the top-up, which answers a repeat."""
        row = top_ups.book(
            conn,
            settled,
            owner_id=owner_id,
            environment=env,
            amount=amount,
            record_id=None if record is None else record.record_id,
            request_id=call.request_id,
            now=call.ctx.now(),
        )
        if record is not None:
            idempotency.lapse(conn, record)
        return row

    try:
        result = await open_rails.pay_service(
            call.ctx, terms, request, call.headers, request_id=call.request_id, book=book, **charge
        )
    except open_rails.SettlementUnavailable as exc:
        raise settlement_unavailable(exc) from None
    if isinstance(result, Row):
        return Reply(top_ups.top_up_model(result), 201)
    raise ApiError(
        "payment_required",
        f"The payment credential was refused: {result.message}.",
        details={"reason": result.reason, "rail": result.rail},
        headers=dict(result.headers),
    )


def _release(ctx: ServerContext, record: idempotency.Begun) -> None:
    """Forget the key of a top-up that was not booked; one a twin that took the key over
    booked is that top-up's (its row references it) and stays."""
    with suppress(IntegrityError):
        idempotency.release(ctx.db, record)


async def _card(call: Call, row: Row[Any], replayed: bool) -> Reply:
    """A pending card top-up and the processor's Checkout to pay it at."""
    env, settings = call.environment, call.ctx.settings
    headers = _REPLAYED if replayed else {}
    if env == "test":  # the sandbox's own checkout page
        sandbox_url = sandbox_checkout.checkout_url(call.public_url, row.id)
        return Reply(top_ups.top_up_model(row, checkout_url=sandbox_url), 201, headers=headers)
    base = f"{call.public_url}/top-ups/{row.id}/done"
    opened = checkout.Checkout(
        id=checkout.checkout_id("top_up", row.id),
        kind=checkout.TOP_UP,
        environment=env,
        amount_micros=int(row.amount_micros),
        name="Account wallet top-up",
        success_url=base,
        cancel_url=base + "?canceled=1",
        owner_id=row.owner_id,
        top_up_id=row.id,
    )
    ctx = call.ctx

    def start() -> str | None:
        if row.status != "pending":
            return None
        with ctx.db.write() as conn:
            checkout.prepare(conn, opened, ctx.now())
        return checkout.open_session(ctx.db, settings, opened, ctx.now())

    try:
        url = await anyio.to_thread.run_sync(start)
    except DomainError:
        if call.key is None:  # no retry can reach this one: it is never paid
            await anyio.to_thread.run_sync(_unopened, call, row.id)
        raise
    return Reply(top_ups.top_up_model(row, checkout_url=url), 201, headers=headers)


def _unopened(call: Call, top_up_id: str) -> None:
    with call.ctx.db.write() as conn:
        top_ups.close_card(conn, top_up_id, status="failed")


@paged
def list_all(call: Call, request: PageRequest) -> Reply:
    """The owner's top-ups in this environment, newest first (paged)."""
    tu = t.top_ups
    page = paging.page(
        call.conn,
        request,
        select(tu),
        table=tu,
        scope=[tu.c.owner_id == call.caller.owner_id, tu.c.environment == call.environment],
        order="desc",
    )
    urls = _checkout_urls(call, [r.id for r in page.rows])
    data = [top_ups.top_up_model(r, checkout_url=urls.get(r.id)) for r in page.rows]
    return Reply(TopUpList(data=data, has_more=page.has_more))


def get_one(call: Call) -> Reply:
    row = call.owned(top_ups.find_owned, "top_up_id")
    url = _checkout_urls(call, [row.id]).get(row.id)
    return Reply(top_ups.top_up_model(row, checkout_url=url))


def _checkout_urls(call: Call, top_up_ids: list[str]) -> dict[str, str]:
    """Where each pending card top-up among ``top_up_ids`` is paid (in ``test``, the
    sandbox's checkout page)."""
    if call.environment == "test":
        return {i: sandbox_checkout.checkout_url(call.public_url, i) for i in top_up_ids}
    cc = t.card_checkouts
    rows = call.conn.execute(
        select(cc.c.top_up_id, cc.c.url).where(
            cc.c.top_up_id.in_(top_up_ids), cc.c.url.is_not(None)
        )
    )
    return {r.top_up_id: r.url for r in rows}


async def done(call: Call) -> Response:
    """The page a card payer returns to from the processor's Checkout: the top-up's
    status (credited once the processor confirms it)."""
    top_up_id = call.params["top_up_id"]
    row = await anyio.to_thread.run_sync(_top_up, call, top_up_id)
    if row is None or row.rail != top_ups.CARD:
        return pages.message(404, "Top-up not found", "No such card top-up.")
    amount = format_micros(int(row.amount_micros))
    if row.status == "succeeded":
        lines = [f"Your top-up of {amount} USD was credited to your account wallet ({row.id})."]
    elif row.status == "pending" and "canceled" not in call.request.query_params:
        lines = [
            f"Payment of {amount} USD received, confirming with the card processor… "
            "Reload this page in a few seconds; you will not be charged twice."
        ]
    else:
        lines = [f"This top-up of {amount} USD was not paid, and nothing was charged."]
    return pages.message(200, "Account wallet top-up", *lines)


def _top_up(call: Call, top_up_id: str) -> Row[Any] | None:
    with call.ctx.db.read() as conn:
        tu = t.top_ups
        return conn.execute(select(tu).where(tu.c.id == top_up_id)).first()


ENDPOINTS = [
    Endpoint(
        method="POST",
        path=PATH,
        handler=create,
        run=Flow(start=_start),
        auth=Role.OWNER,
        idempotency="optional",
        body=CreateTopUp,
        sdk=Sdk(
            "top_ups.create",
            "amount: Amount, *, payer: Any = None, method: str | None = None",
            sdk_only=("payer",),
            send="send_top_up",
            doc="""Top up the account wallet by ``amount``.

            ``method="card"`` (live, with the processor): a ``pending`` top-up comes back at
            once; pay it at its ``checkout_url``, and it is ``succeeded`` once the processor
            says it was paid (``funding.paid``).

            With ``payer`` (an eth-account ``LocalAccount`` or a ``0x…`` private key; needs
            the ``rails`` extra) the SDK pays the challenge itself with the official x402
            client, signing only for exactly ``amount``, and retries with the same
            ``Idempotency-Key``: one call, one payment.  Without it the challenge comes back
            as :class:`~svc.PaymentRequiredError`, its ``headers`` holding
            ``PAYMENT-REQUIRED`` and ``WWW-Authenticate``, for you to pay and retry with
            ``options=RequestOptions(idempotency_key=..., extra_headers={"PAYMENT-SIGNATURE":
            ...})``, as any x402 client would.
            """,
            build="top_up_body",
        ),
        contract=Contract(
            response=TopUp,
            status=201,
            gate=True,
            errors=(
                "payment_required",
                "settlement_unavailable",
                "top_ups_unavailable",
                "idempotency_key_reused",
                "idempotency_in_progress",
            ),
        ),
    ),
    Endpoint(
        method="GET",
        path=PATH,
        handler=list_all,
        auth=Role.OWNER,
        sdk=Sdk(
            "top_ups.list",
            doc="""The owner's top-ups in this environment, newest first.""",
            all_doc="""Every top-up of the owner, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=TopUpList),
    ),
    Endpoint(
        method="GET",
        path=PATH + "/{top_up_id}",
        handler=get_one,
        auth=Role.OWNER,
        sdk=Sdk(
            "top_ups.get",
            "top_up_id: str",
        ),
        contract=Contract(response=TopUp),
    ),
]

#: The page a card payer comes back to (a page for people, beside the buy pages).
PAGES = [
    Endpoint(method="GET", path="/top-ups/{top_up_id}/done", handler=done, page=Page()),
]

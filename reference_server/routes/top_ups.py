"""Top-ups (owner JWT): pay the account wallet from the owner's own wallet.

    POST /owners/me/top-ups {"amount"}            -> 402 + PAYMENT-REQUIRED, WWW-Authenticate
    the same + PAYMENT-SIGNATURE | Authorization: Payment
                                                  -> 201 TopUp (settled, credited)
    POST /owners/me/top-ups {"amount", "method": "card"}
                                                  -> 201 TopUp (pending, checkout_url)
    GET /owners/me/top-ups, GET /owners/me/top-ups/{top_up_id}
    GET /top-ups/{top_up_id}/done                 -> the page the card payer returns to

The payment is the open rails' own charge (:func:`open_rails.pay_service`), paying the
environment's deposit address: ``test`` on the sandbox chain (a faucet wallet pays it),
``live`` through the configured facilitator.  The create handler is async (settling
awaits a facilitator, which must not hold a transaction); its ``Idempotency-Key`` is kept
on the top-up row: the same key answers the same top-up, never a second payment.

``method`` ``card`` (live with ``SVC_PROCESSOR=stripe``) answers at once with a
``pending`` top-up and the processor's ``checkout_url``; it is credited when
``checkout.session.completed`` arrives (:mod:`reference_server.processor.checkout`).
In ``test`` the ``checkout_url`` is the sandbox's own checkout page
(:mod:`.sandbox_checkout`, the sandbox card form): one flow in both environments.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from sqlalchemy import Connection, Row, select
from sqlalchemy.exc import IntegrityError
from starlette.responses import Response

from svc import TopUp, TopUpList
from svc.bodies import CreateTopUp
from svc.money import format_micros, to_micros
from svc_asgi import RailRequest

from ..domain import open_rails, top_ups
from ..domain.errors import DomainError
from ..processor import checkout, uses_stripe
from ..store import tables as t
from ..web import pages, paging
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint, Flow, Page
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from . import sandbox_checkout

__all__ = ["ENDPOINTS", "PAGES"]

PATH = "/owners/me/top-ups"


async def create(call: Call) -> Reply:
    """Top up the account wallet: 402 with the x402/MPP challenges for the amount, paying
    the environment's deposit address; retried with the credential, 201 once settled.
    ``method: card``: 201 at once, a pending top-up paid at its ``checkout_url``."""
    owner_id, env = call.caller.owner_id, call.environment
    amount = _amount(call)
    if call.input(CreateTopUp).method == "card":
        return await _card(call, amount)
    terms = open_rails.service_terms(call.ctx, env)
    if terms is None:
        raise ApiError(
            "top_ups_unavailable",
            "Top-ups in live need SVC_LIVE_FACILITATOR_URL and SVC_LIVE_DEPOSIT_ADDRESS "
            "(and the rails extra).",
        )
    key = call.idempotency_key
    done = await _already_paid(call, key, amount)
    if done is not None:
        return done
    charge: dict[str, Any] = {
        "realm": urlsplit(call.public_url).netloc,
        "amount_micros": amount,
        # Signed into MPP's challenge id, echoed by x402: a credential pays this owner only.
        "binding": {"top_up_for": owner_id},
    }
    request = RailRequest("POST", call.public_url + call.request.url.path)
    credentials = _credentials(call)
    if not credentials:
        headers = await open_rails.service_challenge(call.ctx, terms, request, **charge)
        raise ApiError(
            "payment_required",
            f"Pay {format_micros(amount)} USDC to top up; retry with the credential.",
            headers=dict(headers),
        )
    book = partial(
        _book,
        owner_id=owner_id,
        env=env,
        amount=amount,
        key=key,
        request_id=call.request_id,
        clock=call.ctx.now,
    )
    try:
        result = await open_rails.pay_service(
            call.ctx, terms, request, credentials, request_id=call.request_id, book=book, **charge
        )
    except open_rails.SettlementUnavailable as exc:
        raise ApiError(
            "settlement_unavailable",
            f"The payment could not be settled now ({exc}); do not pay again, retry shortly.",
            headers={"Retry-After": "5"},
        ) from None
    except IntegrityError:  # the same Idempotency-Key paid concurrently: rolled back here
        result = None
    if isinstance(result, Row):
        return Reply(top_ups.top_up_model(result), 201)
    done = await _already_paid(call, key, amount)  # a concurrent retry of the key paid it
    if done is not None:
        return done
    if result is None:
        raise ApiError("idempotency_in_progress", "Retry shortly with the same key.")
    raise ApiError(
        "payment_required",
        f"The payment credential was refused: {result.message}.",
        details={"reason": result.reason, "rail": result.rail},
        headers=dict(result.headers),
    )


async def _card(call: Call, amount: int) -> Reply:
    """A pending card top-up and the processor's Checkout to pay it at."""
    env, settings = call.environment, call.ctx.settings
    if env != "test" and not uses_stripe(settings, env):
        raise ApiError(
            "top_ups_unavailable",
            "Card top-ups in live need the card processor (SVC_PROCESSOR=stripe and its keys).",
        )
    checkout.cents(amount)
    row, replayed = await anyio.to_thread.run_sync(_open_card, call, amount)
    if int(row.amount_micros) != amount or row.rail != top_ups.CARD:
        raise ApiError(
            "idempotency_key_reused",
            "This Idempotency-Key already made another top-up.",
        )
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    if env == "test":  # the sandbox's own checkout page
        sandbox_url = sandbox_checkout.checkout_url(call.public_url, row.id)
        return Reply(top_ups.top_up_model(row, checkout_url=sandbox_url), 201, headers=headers)
    base = f"{call.public_url}/top-ups/{row.id}/done"
    opened = checkout.Checkout(
        id=checkout.checkout_id("top_up", row.id),
        kind=checkout.TOP_UP,
        environment=env,
        amount_micros=amount,
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
        if call.idempotency_key is None:  # no retry can reach this one: it is never paid
            await anyio.to_thread.run_sync(_unopened, call, row.id)
        raise
    return Reply(top_ups.top_up_model(row, checkout_url=url), 201, headers=headers)


def _unopened(call: Call, top_up_id: str) -> None:
    with call.ctx.db.write() as conn:
        top_ups.close_card(conn, top_up_id, status="failed")


def _open_card(call: Call, amount: int) -> tuple[Row[Any], bool]:
    """The pending top-up of this request (or the one its ``Idempotency-Key`` made)."""
    owner_id, env, key = call.caller.owner_id, call.environment, call.idempotency_key
    ctx = call.ctx
    for _ in range(2):
        try:
            with ctx.db.write() as conn:
                if key is not None:
                    found = top_ups.find_by_key(conn, owner_id=owner_id, environment=env, key=key)
                    if found is not None:
                        return found, True
                made = top_ups.open_card(
                    conn,
                    owner_id=owner_id,
                    environment=env,
                    amount=amount,
                    idempotency_key=key,
                    request_id=call.request_id,
                    now=ctx.now(),
                )
                return made, False
        except IntegrityError:  # the same key, concurrently: read the other's row
            continue
    raise ApiError("idempotency_in_progress", "Retry shortly with the same key.")


def _amount(call: Call) -> int:
    amount = to_micros(call.input(CreateTopUp).amount)
    if amount <= 0:
        raise ApiError(
            "validation_error",
            "amount must be positive.",
            details={"errors": [{"field": "amount", "message": "must be positive"}]},
        )
    return amount


async def _already_paid(call: Call, key: str | None, amount: int) -> Reply | None:
    """The top-up this ``Idempotency-Key`` paid already, answered again."""
    if key is None:
        return None
    owner_id, env = call.caller.owner_id, call.environment
    row = await anyio.to_thread.run_sync(_by_key, call, owner_id, env, key)
    return None if row is None else _replayed(row, amount)


def _credentials(call: Call) -> dict[str, str]:
    """The payment credential sent: x402's ``PAYMENT-SIGNATURE`` or MPP's ``Authorization:
    Payment`` (the owner JWT then comes in ``X-Svc-Owner-JWT``)."""
    found = {}
    if "payment-signature" in call.headers:
        found["payment-signature"] = call.headers["payment-signature"]
    value = call.headers.get("authorization", "")
    if value.strip().lower().startswith("payment "):
        found["authorization"] = value
    return found


def _book(
    conn: Connection,
    settled: open_rails.Settled,
    *,
    owner_id: str,
    env: str,
    amount: int,
    key: str | None,
    request_id: str,
    clock: Callable[[], datetime],
) -> Row[Any]:
    return top_ups.book(
        conn,
        settled,
        owner_id=owner_id,
        environment=env,
        amount=amount,
        idempotency_key=key,
        request_id=request_id,
        now=clock(),
    )


def _by_key(call: Call, owner_id: str, env: str, key: str) -> Row[Any] | None:
    with call.ctx.db.read() as conn:
        return top_ups.find_by_key(conn, owner_id=owner_id, environment=env, key=key)


def _replayed(row: Row[Any], amount: int) -> Reply:
    if int(row.amount_micros) != amount:
        raise ApiError(
            "idempotency_key_reused",
            "This Idempotency-Key already paid a top-up of another amount.",
        )
    return Reply(top_ups.top_up_model(row), 201, headers={"Idempotent-Replayed": "true"})


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
    row = top_ups.find_owned(
        call.conn,
        call.params["top_up_id"],
        owner_id=call.caller.owner_id,
        environment=call.environment,
    )
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
        return pages.render(
            "page_message.html", 404, title="Top-up not found", lines=["No such card top-up."]
        )
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
    return pages.render("page_message.html", 200, title="Account wallet top-up", lines=lines)


def _top_up(call: Call, top_up_id: str) -> Row[Any] | None:
    with call.ctx.db.read() as conn:
        tu = t.top_ups
        return conn.execute(select(tu).where(tu.c.id == top_up_id)).first()


ENDPOINTS = [
    Endpoint(
        method="POST",
        path=PATH,
        handler=create,
        run=Flow(),
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

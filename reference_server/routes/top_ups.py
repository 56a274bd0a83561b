"""Top-ups (owner JWT): pay the account wallet from the owner's own wallet.

    POST /owners/me/top-ups {"amount"}            -> 402 + PAYMENT-REQUIRED, WWW-Authenticate
    the same + PAYMENT-SIGNATURE | Authorization: Payment
                                                  -> 201 TopUp (settled, credited)
    GET /owners/me/top-ups, GET /owners/me/top-ups/{top_up_id}

The payment is the open rails' own charge (:func:`open_rails.pay_service`), paying the
environment's deposit address: ``test`` on the sandbox chain (a faucet wallet pays it),
``live`` through the configured facilitator.  The create handler is async (settling
awaits a facilitator, which must not hold a transaction); its ``Idempotency-Key`` is kept
on the top-up row: the same key answers the same top-up, never a second payment.
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

from svc import TopUp, TopUpList
from svc.bodies import CreateTopUp
from svc.money import format_micros, to_micros
from svc_asgi import RailRequest

from ..domain import open_rails, top_ups
from ..store import tables as t
from ..web import paging
from ..web.auth import Role
from ..web.endpoint import Call, Endpoint
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply

__all__ = ["ENDPOINTS"]

PATH = "/owners/me/top-ups"


async def create(call: Call) -> Reply:
    """Top up the account wallet: 402 with the x402/MPP challenges for the amount, paying
    the environment's deposit address; retried with the credential, 201 once settled."""
    owner_id, env = call.caller.owner_id, call.environment
    amount = _amount(call)
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
    return Reply(
        TopUpList(data=[top_ups.top_up_model(r) for r in page.rows], has_more=page.has_more)
    )


def get_one(call: Call) -> Reply:
    row = top_ups.find_owned(
        call.conn,
        call.params["top_up_id"],
        owner_id=call.caller.owner_id,
        environment=call.environment,
    )
    return Reply(top_ups.top_up_model(row))


ENDPOINTS = [
    Endpoint(
        method="POST",
        path=PATH,
        handler=create,
        auth=Role.OWNER,
        idempotency="optional",
        body=CreateTopUp,
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
    Endpoint(method="GET", path=PATH, handler=list_all, auth=Role.OWNER, response=TopUpList),
    Endpoint(
        method="GET",
        path=PATH + "/{top_up_id}",
        handler=get_one,
        auth=Role.OWNER,
        response=TopUp,
    ),
]

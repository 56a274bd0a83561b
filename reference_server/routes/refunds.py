"""Refunds, with the seller key: ``POST /refunds``, ``GET /refunds``, ``GET /refunds/{id}``;
and ``GET /payments/{receipt_id}``, where a payment stands (its payer, its seller or the
owner of either)."""

from __future__ import annotations

import hashlib

from sqlalchemy import select

from svc import Payment, Refund, RefundList
from svc.bodies import CreateRefund
from svc.money import to_micros

from ..domain import refunds
from ..ids import new_id
from ..store import tables as t
from ..web.auth import AnyCredential, Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields

__all__ = ["ENDPOINTS"]


def create(call: Call) -> Reply:
    """Give back all or part of a payment the seller received (``domain.refunds``)."""
    b = call.input(CreateRefund)
    if b.amount is not None and b.amount <= 0:
        f = Fields.rules(call.body)
        f.error("amount", "must be more than 0")
        f.done()
    seller = call.caller
    row = refunds.refund(
        call.conn,
        seller_id=seller.seller_id,
        environment=seller.environment,
        receipt_id=b.receipt_id,
        amount=None if b.amount is None else to_micros(b.amount),
        reason=b.reason,
        request_id=call.request_id,
        now=call.now,
        refund_id=_refund_id(call),
        settings=call.ctx.settings,
    )
    return Reply(refunds.refund_model(row), 201)


def _refund_id(call: Call) -> str:
    """The refund's id, derived from the request's Idempotency-Key: a request run again
    makes the same refund, and the card processor's key derives from this id.  A key
    whose record lapsed and was used again gets a fresh id."""
    seller = call.caller
    key = call.request.headers.get("idempotency-key", "")
    seed = f"{seller.credential_id}\n{seller.environment}\n{key}"
    derived = "rfnd_" + hashlib.sha256(seed.encode()).hexdigest()[:24]
    f = t.refunds
    taken = call.conn.execute(select(f.c.id).where(f.c.id == derived)).first()
    return new_id("rfnd") if taken is not None else derived


@paged
def list_refunds(call: Call, request: PageRequest) -> Reply:
    """The seller's refunds, newest first (paged)."""
    page = refunds.list_refunds(call.conn, request, seller_id=call.caller.seller_id)
    data = [refunds.refund_model(r) for r in page.rows]
    return Reply(RefundList(data=data, has_more=page.has_more))


def get(call: Call) -> Reply:
    """One of the seller's refunds."""
    row = refunds.find_refund(call.conn, call.params["refund_id"], seller_id=call.caller.seller_id)
    return Reply(refunds.refund_model(row))


def payment(call: Call) -> Reply:
    """Where a payment stands: ``claimed``, ``settled``, ``released`` or ``refunded``."""
    return Reply(refunds.payment(call.conn, call.params["receipt_id"], call.caller))


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/refunds",
        handler=create,
        auth=Role.SELLER,
        idempotency="required",
        body=CreateRefund,
        sdk=Sdk(
            "refunds.create",
            "receipt_id: str, *, amount: Amount | None = None, reason: str | None = None",
            doc="""Give back ``amount`` of a payment (``None``: all that is not refunded
            yet), never more than was paid across refunds.

            On the ledger rail the money goes back to the payer's wallet key at once, from
            the seller's balance (refused with ``insufficient_balance`` when the balance is
            lower); a card payment's through the card processor (in live, ``status``
            ``pending`` until the processor has refunded it, ``failed`` if it refuses).
            An ``Idempotency-Key`` is sent and reused by retries, so a retried call
            refunds once.""",
        ),
        contract=Contract(
            response=Refund,
            status=201,
            errors=(
                "not_found",
                "refund_exceeds_payment",
                "payment_not_settled",
                "insufficient_balance",
                "refund_not_custodial",
                "refund_unsupported_rail",
                "settlement_unavailable",
            ),
        ),
    ),
    Endpoint(
        method="GET",
        path="/refunds",
        handler=list_refunds,
        auth=Role.SELLER,
        sdk=Sdk(
            "refunds.list",
            doc="""The seller's refunds, newest first.""",
            all_doc="""Every refund of the seller, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=RefundList),
    ),
    Endpoint(
        method="GET",
        path="/refunds/{refund_id}",
        handler=get,
        auth=Role.SELLER,
        sdk=Sdk("refunds.get", "refund_id: str", doc="""One of the seller's refunds."""),
        contract=Contract(response=Refund, errors=("not_found",)),
    ),
    Endpoint(
        method="GET",
        path="/payments/{receipt_id}",
        handler=payment,
        auth=AnyCredential(),
        sdk=Sdk(
            "payments.get",
            "receipt_id: str",
            doc="""Where a payment stands, for a client that lost the answer: ``state``
            ``claimed``, ``settled``, ``released`` or ``refunded`` (``refunded`` and
            ``remaining`` say how much).

            Sent with the wallet key when the client has one, else the seller key, else
            the owner JWT.""",
        ),
        contract=Contract(response=Payment, errors=("not_found",)),
    ),
]

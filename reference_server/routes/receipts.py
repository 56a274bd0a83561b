"""Receipts: ``GET /receipts/{receipt_id}`` (its payer or its seller) and
``POST /receipts/{receipt_id}/capture`` (the seller of a metered ledger payment)."""

from __future__ import annotations

import attrs

from svc import Receipt
from svc.bodies import CaptureReceipt
from svc.money import MAX_UNITS

from .. import receipt_tokens
from ..domain import metered
from ..web.auth import AnyCredential, Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields

__all__ = ["ENDPOINTS"]


def read(call: Call) -> Reply:
    """One receipt: its status, amount and, metered, its units and maximum.

    Readable by its payer (the wallet key that paid, or that key's owner) and by the
    seller paid (or its owner), in the receipt's environment; to anyone else it does not
    exist (``not_found``).  A settled receipt carries a fresh signed ``receipt_token``.
    """
    receipt = metered.readable_receipt(call.conn, call.params["receipt_id"], call.caller)
    token = receipt_tokens.token_for(call.ctx, call.conn, receipt.id, call.now)
    return Reply(attrs.evolve(receipt, receipt_token=token))


def capture(call: Call) -> Reply:
    """Capture a metered ledger payment: charge the units its answer used.

    The authorization's hold is voided and ``units`` * the unit price (at most the
    maximum) is charged as a sale, ``payment.succeeded`` with it; 0 units releases it
    (nothing is charged).  Once only: a receipt captured or released already is
    ``receipt_not_authorized``.
    """
    b = call.input(CaptureReceipt)
    if not 0 <= b.units <= MAX_UNITS:
        f = Fields.rules(call.body)
        f.error("units", f"must be a whole number from 0 to {MAX_UNITS}")
        f.done()
    seller = call.caller
    return Reply(
        metered.capture(
            call.conn,
            receipt_id=call.params["receipt_id"],
            seller_id=seller.seller_id,
            environment=seller.environment,
            units=b.units,
            fee_bps=call.ctx.settings.platform_fee_bps,
            request_id=call.request_id,
            now=call.now,
        )
    )


ENDPOINTS = [
    Endpoint(
        method="GET",
        path="/receipts/{receipt_id}",
        handler=read,
        auth=AnyCredential(),
        sdk=Sdk(
            "receipts.get",
            "receipt_id: str",
            doc="""One receipt, as its payer or its seller reads it (status, amount, units).

            Sent with the wallet key when the client has one, else the seller key, else
            the owner JWT.""",
        ),
        contract=Contract(response=Receipt, errors=("not_found",)),
    ),
    Endpoint(
        method="POST",
        path="/receipts/{receipt_id}/capture",
        handler=capture,
        auth=Role.SELLER,
        idempotency="required",
        body=CaptureReceipt,
        sdk=Sdk(
            "receipts.capture",
            "receipt_id: str, *, units: int",
            doc="""Capture a metered ledger payment: charge the ``units`` its answer used
            (at most the authorised maximum; 0 releases it).""",
        ),
        contract=Contract(
            response=Receipt,
            errors=("not_found", "receipt_not_authorized"),
        ),
    ),
]

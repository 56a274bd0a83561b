"""Receipts: ``POST /access/verify``."""

from __future__ import annotations

from svc import ReceiptVerification
from svc.bodies import VerifyReceipt

from ..domain import payments
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint, OptionalAuth
from ..web.responses import Reply
from ..web.sdk import Sdk

__all__ = ["ENDPOINTS"]


def verify(call: Call) -> Reply:
    """Is this receipt valid (for this resource)?  Unknown receipts are ``valid: false``.

    Anyone holding a receipt id may ask; a seller key, when sent, also binds the answer to
    that seller's resources.
    """
    b = call.input(VerifyReceipt)
    seller_id = call.principal.seller_id if call.principal is not None else None
    return Reply(
        payments.verify_receipt(
            call.conn, b.receipt_id, resource_id=b.resource_id, seller_id=seller_id
        )
    )


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/access/verify",
        handler=verify,
        auth=OptionalAuth(Role.SELLER),
        body=VerifyReceipt,
        sdk=Sdk(
            "access.verify",
            "receipt_id: str, resource_id: str | None = None",
            doc="""Whether ``receipt_id`` is a valid receipt (for ``resource_id``, when given).

            An unknown receipt is ``valid=False``, not an error.  The seller key is sent when
            the client (or ``options``) has one, and nothing otherwise.
            """,
            build="verify_receipt_body",
        ),
        contract=Contract(response=ReceiptVerification),
    ),
]

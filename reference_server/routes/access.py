"""Receipts: ``POST /access/verify`` and the demonstration gate ``GET /demo/echo``."""

from __future__ import annotations

from typing import Any

from svc.receipts import MalformedReceipt, receipt_id_from_headers

from ..api.auth import Role
from ..api.endpoint import Call, Endpoint
from ..api.errors import ApiError
from ..api.responses import Reply
from ..api.validate import Fields
from ..domain import payments
from ..domain.demo import DEMO_AMOUNT
from ..domain.resources import find_any_resource, resource_model

__all__ = ["ENDPOINTS"]

_ECHOED_HEADERS = ("user-agent", "accept", "content-type", "x-svc-receipt")


def verify(call: Call) -> Reply:
    """Is this receipt valid (for this resource)?  Unknown receipts are ``valid: false``.

    Anyone holding a receipt id may ask; a seller key, when sent, also binds the answer to
    that seller's resources.
    """
    f = Fields(call.body)
    receipt_id = f.string("receipt_id", required=True, max_length=100)
    resource_id = f.string("resource_id", max_length=40)
    f.done()
    assert receipt_id is not None
    seller_id = call.principal.seller_id if call.principal is not None else None
    return Reply(
        payments.verify_receipt(call.conn, receipt_id, resource_id=resource_id, seller_id=seller_id)
    )


def echo(call: Call) -> Reply:
    """Demonstration gate: 402 until a receipt for the demo resource is presented."""
    demo = call.ctx.demo_resources()
    try:
        receipt_id = receipt_id_from_headers(call.headers)
    except MalformedReceipt as exc:
        raise _payment_required(call, demo, f"Malformed receipt: {exc}.") from None
    if receipt_id is None:
        raise _payment_required(call, demo, "Pay for /demo/echo, then send the receipt.")
    verdict = None
    for resource_id in demo.values():
        verdict = payments.verify_receipt(
            call.conn, receipt_id, resource_id=resource_id, seller_id=None
        )
        if verdict.valid:
            break
    if verdict is None or not verdict.valid:
        reason = verdict.reason if verdict is not None else "unknown receipt"
        raise _payment_required(call, demo, f"The receipt was refused: {reason}.")
    return Reply(
        {
            "echo": {
                "method": "GET",
                "path": "/demo/echo",
                "query": dict(call.query),
                "headers": {h: call.headers[h] for h in _ECHOED_HEADERS if h in call.headers},
            },
            "receipt": {
                "receipt_id": verdict.receipt_id,
                "resource_id": verdict.resource_id,
                "amount": str(verdict.amount),
                "environment": verdict.environment,
            },
        },
        headers={"Cache-Control": "no-store"},
    )


def _payment_required(call: Call, demo: dict[str, str], message: str) -> ApiError:
    env = call.environment
    row = find_any_resource(call.conn, demo[env])
    details: dict[str, Any] = {"amount": str(DEMO_AMOUNT), "currency": "USD"}
    if row is not None:
        model = resource_model(row, call.public_url)
        details.update(
            resource_id=model.id,
            gate_url=model.gate_url,
            pay_url=model.pay_url,
            environment=env,
            pay_with='POST /pay {"resource_id"} with a wallet key, then send X-Svc-Receipt',
        )
    return ApiError(
        "payment_required", message, details=details, headers={"Cache-Control": "no-store"}
    )


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/access/verify",
        handler=verify,
        auth=Role.SELLER,
        auth_optional=True,
    ),
    Endpoint(method="GET", path="/demo/echo", handler=echo),
]

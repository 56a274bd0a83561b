"""Live only: what the paid URL's answer says about settlement.

In ``test`` the sandbox chain is asked directly.  In ``live`` the service has no chain of
its own to ask, so the URL's settlement receipt -- x402 ``PAYMENT-RESPONSE`` (or v1
``X-PAYMENT-RESPONSE``) with ``success`` and a transaction, or an MPP ``Payment-Receipt``
with status ``success`` and a reference -- read with the SDKs' own decoders, is the only
confirmation.  Without one the attempt stays ``pending`` (docs/pay-url.md).
"""

from __future__ import annotations

import httpx

from ...recursion import keeping_recursion_limit

__all__ = ["confirmed_transaction"]


def confirmed_transaction(rail: str, headers: httpx.Headers) -> str | None:
    """The settling transaction the answer reports, or ``None`` if it reports none."""
    try:
        return _x402(headers) if rail == "x402" else _mpp(headers)
    except Exception:  # a malformed receipt confirms nothing
        return None


def _x402(headers: httpx.Headers) -> str | None:
    with keeping_recursion_limit():
        from x402.http import (
            PAYMENT_RESPONSE_HEADER,
            X_PAYMENT_RESPONSE_HEADER,
            decode_payment_response_header,
        )
    raw = headers.get(PAYMENT_RESPONSE_HEADER) or headers.get(X_PAYMENT_RESPONSE_HEADER)
    if not raw:
        return None
    settled = decode_payment_response_header(raw)
    return settled.transaction if settled.success and settled.transaction else None


def _mpp(headers: httpx.Headers) -> str | None:
    with keeping_recursion_limit():
        from mpp import Receipt
    raw = headers.get("payment-receipt")
    if not raw:
        return None
    receipt = Receipt.from_payment_receipt(raw)
    return receipt.reference if receipt.status == "success" and receipt.reference else None

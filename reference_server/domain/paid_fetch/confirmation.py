"""Live only: what the paid URL's answer says about settlement.

In ``test`` the sandbox chain is asked directly.  In ``live`` the service has no chain of
its own to ask, so the URL's settlement receipt -- x402 ``PAYMENT-RESPONSE`` (or v1
``X-PAYMENT-RESPONSE``) with ``success`` and a transaction, or an MPP ``Payment-Receipt``
with status ``success`` and a reference -- read with the SDKs' own decoders, is the only
confirmation.  Without one the attempt stays ``pending`` (docs/pay-url.md).

With ``live_rpc_url`` set the receipt is only a claim: :func:`confirmed_on_chain` reads the
transaction it names on the live chain, and only a transfer of exactly the price from the
hot wallet to the offer's ``payTo`` is posted (otherwise the attempt stays ``pending``).
"""

from __future__ import annotations

import httpx

from ...onchain import ChainUnreachable, TokenReader
from ...recursion import keeping_recursion_limit

__all__ = ["confirmed_on_chain", "confirmed_transaction", "settled_amount"]


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


def settled_amount(headers: httpx.Headers) -> int | None:
    """The atomic amount an x402 ``upto`` settlement receipt says moved (its
    ``SettleResponse.amount``), or ``None`` when it says none a number can be read from."""
    with keeping_recursion_limit():
        from x402.http import PAYMENT_RESPONSE_HEADER, decode_payment_response_header
    raw = headers.get(PAYMENT_RESPONSE_HEADER)
    try:
        amount = decode_payment_response_header(raw).amount if raw else None
    except Exception:  # a malformed receipt says nothing
        return None
    if not isinstance(amount, str) or not amount.isascii() or not amount.isdigit():
        return None
    return int(amount)


def _mpp(headers: httpx.Headers) -> str | None:
    with keeping_recursion_limit():
        from mpp import Receipt
    raw = headers.get("payment-receipt")
    if not raw:
        return None
    receipt = Receipt.from_payment_receipt(raw)
    return receipt.reference if receipt.status == "success" and receipt.reference else None


def confirmed_on_chain(
    rpc_url: str, asset: str, tx_hash: str, *, sender: str, receiver: str, value: int
) -> bool:
    """Did ``tx_hash`` move exactly ``value`` from ``sender`` to ``receiver`` on the live
    chain?  False also when the node cannot say now (blocking)."""
    try:
        return TokenReader(rpc_url, asset).paid(
            tx_hash, sender=sender, receiver=receiver, value=value
        )
    except (ChainUnreachable, ValueError):
        return False

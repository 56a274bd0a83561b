"""The verified payment a gate hands to the app: :class:`Payment` and :func:`payment_of`.

The gate passes a paid request on with the payment in the ASGI scope's state
(``scope["state"]["svc_payment"]``), the one place every ASGI framework carries from the
server to the handler (Starlette and FastAPI expose it as ``request.state``).  The app
reads it with :func:`payment_of`, whatever it holds (a scope, a Starlette or FastAPI
request, an MCP tool context's request).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import attrs

from svc import ReceiptVerification

__all__ = ["GATE_ERROR_STATE_KEY", "STATE_KEY", "Payment", "payment_of"]

#: ``scope["state"]`` key of the verified :class:`Payment`.
STATE_KEY = "svc_payment"
#: ``scope["state"]`` key set instead when ``on_service_error="fail_open"`` let a request
#: through unverified (its value says why); such a request has no :class:`Payment`.
GATE_ERROR_STATE_KEY = "svc_gate_error"


@attrs.frozen(kw_only=True)
class Payment:
    """A receipt the service confirmed for the resource this request needs.

    ``sku_kind`` says what was bought: ``one_shot`` (access to the resource) or
    ``credit_topup`` (``credits`` units of ``credit_unit`` that *your app* adds to the
    buyer's balance).  The gate does not count uses: the same receipt passes again until
    the service stops confirming it, so an app that grants credits must dedupe on
    ``receipt_id`` (the webhook rule for top-ups is the same).
    """

    receipt_id: str
    resource_id: str
    amount: Decimal | None
    #: How it was paid: ``rill`` (the service ledger), ``x402`` or ``mpp``.
    rail: str | None
    sku_kind: str
    credits: Decimal | None
    credit_unit: str | None
    environment: str | None
    #: Where the credential came from: ``header``, ``mcp_meta``, or the open rail that
    #: was paid at the gate itself (``x402``, ``mpp``).
    source: str
    #: The service's full answer, for anything not lifted onto this object.
    verification: ReceiptVerification

    @property
    def is_credit_topup(self) -> bool:
        return self.sku_kind == "credit_topup"

    @classmethod
    def from_verification(
        cls, verification: ReceiptVerification, *, resource_id: str, source: str
    ) -> Payment:
        metadata = verification.metadata
        return cls(
            receipt_id=verification.receipt_id,
            resource_id=verification.resource_id or resource_id,
            amount=verification.amount,
            rail=verification.rail,
            sku_kind=metadata.sku_kind if metadata is not None else "one_shot",
            credits=metadata.credits if metadata is not None else None,
            credit_unit=metadata.credit_unit if metadata is not None else None,
            environment=verification.environment,
            source=source,
            verification=verification,
        )


def payment_of(request: Any) -> Payment | None:
    """The verified :class:`Payment` of a request the gate let through, else ``None``.

    ``request`` is an ASGI scope (a mapping) or any object with a ``.scope`` (Starlette's
    and FastAPI's ``Request``, Litestar's ``Request``).  ``None`` means the route is not
    priced, or the gate failed open.
    """
    scope = request if isinstance(request, Mapping) else getattr(request, "scope", None)
    if not isinstance(scope, Mapping):
        raise TypeError("payment_of() takes an ASGI scope or a request object with .scope")
    state = scope.get("state")
    if not isinstance(state, Mapping):
        return None
    found = state.get(STATE_KEY)
    return found if isinstance(found, Payment) else None

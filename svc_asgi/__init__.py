"""svc_asgi: a pure ASGI payment gate for any seller app.

Put :class:`PaymentGate` in front of an ASGI app (Starlette, FastAPI, Litestar, a bare
callable) and the routes and MCP tools named in ``prices`` are sold for the service's
resources: unpaid requests get a 402 that says what to pay; paid ones reach the app with
the verified :class:`Payment`, read with :func:`payment_of`::

    from svc_asgi import PaymentGate, payment_of

    app = PaymentGate(app, seller_key="svc_sk_…", prices={"GET /v1/report": "res_…"})

The decisions live in :class:`GateCore`, shared with the reference server's hosted gates
and parameterised by a :class:`GateBackend` (the service's API here, a database there).
:class:`PaymentRail` is where open rails (x402, MPP) plug in; :class:`ServiceRails`, the
default of a gate talking to the service, has the service challenge and settle them, so
the app holds no keys.  Everything else is in private modules.  Depends on ``svc`` and
``cachetools`` only: no web framework, x402 or MPP package is needed at run time.
"""

from ._after_body import serve_held
from ._asgi import new_request_id
from ._backend import BackendUnavailable, GateBackend, ServiceBackend, captured_verification
from ._core import (
    RECEIPT_META_KEY,
    FailedOpen,
    GateCore,
    Held,
    OnServiceError,
    Outcome,
    Paid,
    Refusal,
)
from ._mcp import PAYMENT_REQUIRED_META_KEY, McpChallenge
from ._middleware import PaymentGate
from ._offer import Offer
from ._payment import GATE_ERROR_STATE_KEY, STATE_KEY, Payment, payment_of
from ._prices import PriceTable, Route
from ._rails import HoldingRail, PaymentRail, RailRedemption, RailRequest, RailRequestSource
from ._service_rails import ServiceRails
from ._usage import USAGE_EXTENSION, USAGE_HEADER

__all__ = [
    "GATE_ERROR_STATE_KEY",
    "PAYMENT_REQUIRED_META_KEY",
    "RECEIPT_META_KEY",
    "STATE_KEY",
    "USAGE_EXTENSION",
    "USAGE_HEADER",
    "BackendUnavailable",
    "FailedOpen",
    "GateBackend",
    "GateCore",
    "Held",
    "HoldingRail",
    "McpChallenge",
    "Offer",
    "OnServiceError",
    "Outcome",
    "Paid",
    "Payment",
    "PaymentGate",
    "PaymentRail",
    "PriceTable",
    "RailRedemption",
    "RailRequest",
    "RailRequestSource",
    "Refusal",
    "Route",
    "ServiceBackend",
    "ServiceRails",
    "captured_verification",
    "new_request_id",
    "payment_of",
    "serve_held",
]

"""A Starlette app selling ``GET /v1/report``.

Run it with the seller key and the resource the report is sold as::

    SVC_BASE_URL=http://127.0.0.1:8000 SVC_SELLER_KEY=svc_sk_test_… \
    REPORT_RESOURCE_ID=res_… uvicorn gate_starlette:app
"""

import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from svc_asgi import PaymentGate, payment_of


async def report(request: Request) -> JSONResponse:
    payment = payment_of(request)
    assert payment is not None  # the gate lets only paid requests through to here
    return JSONResponse({"report": "all systems nominal", "receipt_id": payment.receipt_id})


# The service URL and seller key come from SVC_BASE_URL and SVC_SELLER_KEY.
app = PaymentGate(
    Starlette(routes=[Route("/v1/report", report)]),
    prices={"GET /v1/report": os.environ["REPORT_RESOURCE_ID"]},
)

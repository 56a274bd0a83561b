"""A FastAPI app selling ``GET /v1/report`` and credit top-ups at ``POST /v1/credits``.

Run it with the seller key and the resources sold::

    SVC_BASE_URL=http://127.0.0.1:8000 SVC_SELLER_KEY=svc_sk_test_… \
    REPORT_RESOURCE_ID=res_… CREDITS_RESOURCE_ID=res_… uvicorn gate_fastapi:app
"""

import os

from fastapi import FastAPI, Request

from svc_asgi import PaymentGate, payment_of

app = FastAPI()
app.add_middleware(
    PaymentGate,
    prices={
        "GET /v1/report": os.environ["REPORT_RESOURCE_ID"],
        "POST /v1/credits": os.environ["CREDITS_RESOURCE_ID"],  # a credit_topup resource
    },
)

balances: dict[str, int] = {}  # a real app keeps these in its database
credited: set[str] = set()  # receipt ids already credited: a receipt counts once


@app.get("/v1/report")
async def report(request: Request) -> dict[str, str]:
    payment = payment_of(request)
    assert payment is not None  # the gate lets only paid requests through to here
    return {"report": "all systems nominal", "receipt_id": payment.receipt_id}


@app.post("/v1/credits")
async def add_credits(request: Request, user: str) -> dict[str, int]:
    payment = payment_of(request)
    assert payment is not None and payment.credits is not None
    if payment.receipt_id not in credited:
        credited.add(payment.receipt_id)
        balances[user] = balances.get(user, 0) + int(payment.credits)
    return {"balance": balances[user]}

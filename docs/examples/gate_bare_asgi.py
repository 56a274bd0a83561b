"""A bare ASGI app (no framework) selling ``/v1/report``.

Run it with the seller key and the resource the report is sold as::

    SVC_BASE_URL=http://127.0.0.1:8000 SVC_SELLER_KEY=svc_sk_test_… \
    REPORT_RESOURCE_ID=res_… uvicorn gate_bare_asgi:app
"""

import json
import os
from typing import Any

from svc_asgi import PaymentGate, payment_of


async def report(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    payment = payment_of(scope)
    assert payment is not None  # the gate lets only paid requests through to here
    body = json.dumps({"report": "all systems nominal", "receipt_id": payment.receipt_id})
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


# Any method on /v1/report is sold; service URL and key come from SVC_BASE_URL and
# SVC_SELLER_KEY.
app = PaymentGate(report, prices={"/v1/report": os.environ["REPORT_RESOURCE_ID"]})

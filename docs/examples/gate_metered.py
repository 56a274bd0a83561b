"""A Starlette app streaming an answer token by token from ``GET /v1/chat``, sold by the
token: a metered resource, so the gate settles after the last token for the tokens the app
reported, and ends the stream with an ``svc-receipt`` event saying what was charged.

Create the resource once (``pricing="metered"``: 0.0001 a token, at most 0.50)::

    seller.resources.create(kind="http", path="/v1/chat", pricing="metered",
                            unit_price="0.0001", unit="token", max_amount="0.50")

then run the app with the seller key and that resource::

    SVC_BASE_URL=http://127.0.0.1:8000 SVC_SELLER_KEY=svc_sk_test_… \
    CHAT_RESOURCE_ID=res_… uvicorn gate_metered:app
"""

import os
from collections.abc import AsyncIterator

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from svc_asgi import PaymentGate

#: A model stand-in: the answer it streams, one token at a time.
ANSWER = ["the", "owls", "are", "not", "what", "they", "seem"]


async def chat(request: Request) -> StreamingResponse:
    report = request.scope["extensions"]["svc.usage"]  # each call adds units to the bill

    async def tokens() -> AsyncIterator[str]:
        for token in ANSWER:
            await anyio.sleep(0.01)  # the model at work
            report(1)
            yield f"data: {token}\n\n"

    return StreamingResponse(tokens(), media_type="text/event-stream")


# The service URL and seller key come from SVC_BASE_URL and SVC_SELLER_KEY.
app = PaymentGate(
    Starlette(routes=[Route("/v1/chat", chat)]),
    prices={"GET /v1/chat": os.environ["CHAT_RESOURCE_ID"]},  # metered: settled after the body
)

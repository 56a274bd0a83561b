"""A webhook receiver in Starlette.

Run it from docs/examples, with the endpoint's signing secret:

    SVC_WEBHOOK_SECRET=whsec_... uvicorn --factory receiver_starlette:app_from_env
"""

import os
from collections.abc import Sequence

from credit_store import CreditStore
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from svc import webhooks


def create_app(signing_secrets: Sequence[str], store: CreditStore) -> Starlette:
    async def svc_webhook(request: Request) -> Response:
        body = await request.body()  # the raw bytes: never request.json()
        try:
            event = webhooks.verify(signing_secrets, body, request.headers)
        except webhooks.WebhookVerificationError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        if store.seen(event.id):
            return Response(status_code=204)  # a retry of an event handled already
        # Answer now; the task runs once the response has been sent.
        return Response(status_code=204, background=BackgroundTask(store.handle, event))

    return Starlette(routes=[Route("/svc/webhooks", svc_webhook, methods=["POST"])])


def app_from_env() -> Starlette:
    # While rotating, list the new secret and the old one: see "Rotating the secret".
    return create_app([os.environ["SVC_WEBHOOK_SECRET"]], CreditStore())

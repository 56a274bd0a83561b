"""A webhook receiver in FastAPI.

Run it from docs/examples, with the endpoint's signing secret:

    SVC_WEBHOOK_SECRET=whsec_... uvicorn --factory receiver_fastapi:app_from_env
"""

import os
from collections.abc import Sequence

from credit_store import CreditStore
from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from svc import webhooks


def create_app(signing_secrets: Sequence[str], store: CreditStore) -> FastAPI:
    app = FastAPI()

    # No body parameter (no pydantic model): FastAPI would parse the JSON, and the
    # signature covers the raw bytes.
    @app.post("/svc/webhooks", status_code=204)
    async def svc_webhook(request: Request, background: BackgroundTasks) -> Response:
        body = await request.body()  # the raw bytes
        try:
            event = webhooks.verify(signing_secrets, body, request.headers)
        except webhooks.WebhookVerificationError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        if not store.seen(event.id):  # else a retry of an event handled already
            background.add_task(store.handle, event)  # runs once the response is sent
        return Response(status_code=204)

    return app


def app_from_env() -> FastAPI:
    # While rotating, list the new secret and the old one: see "Rotating the secret".
    return create_app([os.environ["SVC_WEBHOOK_SECRET"]], CreditStore())

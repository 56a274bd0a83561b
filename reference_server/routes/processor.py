"""``POST /processor/webhooks``: where the processor (Stripe) sends its events.

No credential: the processor proves itself by the ``Stripe-Signature`` header, checked
against ``SVC_STRIPE_WEBHOOK_SECRET`` (:mod:`reference_server.processor.webhooks`).  A
server without that secret answers 404, as for any route it does not serve.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.responses import Response

from ..processor import webhooks
from ..web import pages
from ..web.endpoint import RAW_BODY, Call, Contract, Endpoint, Flow, Page
from ..web.errors import ApiError
from ..web.responses import Reply

__all__ = ["ENDPOINTS"]


async def processor_webhook(call: Call) -> Reply:
    """Receive a processor event: verified, recorded once by id, applied."""
    ctx = call.ctx
    limit = ctx.settings.max_body_bytes
    payload = bytearray()
    async for chunk in call.request.stream():
        payload += chunk
        if len(payload) > limit:
            raise ApiError("payload_too_large", f"The event is larger than {limit} bytes.")
    signature = call.request.headers.get("stripe-signature")
    event = await anyio.to_thread.run_sync(webhooks.verify, ctx.settings, bytes(payload), signature)
    received = await anyio.to_thread.run_sync(
        lambda: webhooks.receive(
            ctx.db, ctx.settings, event, ctx.now(), notify=ctx.notify_new_events
        )
    )
    return Reply({"id": event.id, "type": event.type, "received": received})


async def connect_return(call: Call) -> Response:
    """Where Stripe sends a seller back after its onboarding form."""
    return pages.message(
        200,
        "Payout account details sent",
        "Stripe has what you entered. Your payout account is updated as soon as Stripe "
        "confirms it: check it with `svc connect status` (or GET /sellers/me/connect); "
        "if it still needs something, `svc connect onboard` gives you a new link.",
    )


async def connect_refresh(call: Call) -> Response:
    """Where Stripe sends a seller whose onboarding link expired or was used."""
    return pages.message(
        200,
        "This onboarding link has expired",
        "Onboarding links work once and for a few minutes. Get a new one with "
        "`svc connect onboard` (or POST /sellers/me/connect/onboard) and open it.",
    )


ENDPOINTS = [
    Endpoint(method="GET", path="/processor/connect/return", handler=connect_return, page=Page()),
    Endpoint(method="GET", path="/processor/connect/refresh", handler=connect_refresh, page=Page()),
    Endpoint(
        method="POST",
        path="/processor/webhooks",
        handler=processor_webhook,
        run=Flow(),
        body=RAW_BODY,
        contract=Contract(
            listed=False, errors=("invalid_signature", "not_found", "payload_too_large")
        ),
    ),
]

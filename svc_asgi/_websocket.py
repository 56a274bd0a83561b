"""WebSocket handshakes in ASGI terms: closing one before ``websocket.accept`` (answering
it with an HTTP status is :func:`~svc_asgi._asgi.send_response`'s), and adding headers to
the ``websocket.accept`` of a paid one.

A handshake is an HTTP ``GET`` until it is accepted, so a gate decides it like any other
request.  What differs is the answer: a server offering the ASGI ``websocket.http.response``
extension lets the app send a whole HTTP response instead of accepting (the gate's 402,
challenge headers and JSON envelope, exactly as for HTTP); without it, the only refusal
ASGI has is ``websocket.close`` before accept (which servers turn into a bare 403).
"""

from __future__ import annotations

from ._asgi import Message, Send
from ._core import Refusal

__all__ = [
    "DENIAL_EXTENSION",
    "POLICY_VIOLATION",
    "TRY_AGAIN_LATER",
    "add_accept_headers",
    "close_reason",
]

#: The ASGI extension (``scope["extensions"]``) for an HTTP answer to a handshake.
DENIAL_EXTENSION = "websocket.http.response"
#: RFC 6455 close codes: the handshake breaks a policy (unpaid); the service is down.
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
#: A close frame's reason is at most 123 bytes of UTF-8.
_MAX_REASON_BYTES = 123


def close_reason(refusal: Refusal) -> str:
    """``"402 payment_required: …"``, cut to what a close frame can carry."""
    text = f"{refusal.status} {refusal.code}: {refusal.message}"
    return text.encode()[:_MAX_REASON_BYTES].decode(errors="ignore")


def add_accept_headers(
    send: Send, added: tuple[tuple[bytes, bytes], ...], replaced: frozenset[bytes]
) -> Send:
    """A ``send`` that puts ``added`` on the app's ``websocket.accept`` (replacing any
    header of the same name the app set), as a paid HTTP response gets them."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "websocket.accept":
            headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() not in replaced]
            message = {**message, "headers": [*headers, *added]}
        await send(message)

    return send_with_headers

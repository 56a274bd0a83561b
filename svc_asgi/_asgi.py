"""ASGI plumbing without a framework: types, headers, bounded bodies, replay, answers.

``svc_asgi`` must run under any ASGI framework (Starlette, FastAPI, Litestar, a bare
app), so it cannot borrow Starlette's ``Request``/``Response``.  What it needs is small
and lives here: the ASGI type aliases (structurally the same as Starlette's, so a gate
type-checks wherever a Starlette middleware does), reading request headers out of the
scope, reading a body with a hard size limit, handing an already-read body to the app
again, and sending a complete response.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import quote

from svc.receipts import RECEIPT_HEADERS

__all__ = [
    "ASGIApp",
    "BodyTooLarge",
    "ClientDisconnected",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "add_paid_headers",
    "credential_headers",
    "header_map",
    "new_request_id",
    "paid_watched",
    "read_body",
    "replay",
    "request_id_of",
    "request_url",
    "route_path",
    "send_response",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Request headers beyond this many bytes in total are not read for receipts.  ASGI
#: servers bound headers themselves (uvicorn: h11's 64 KiB); this is the gate's own
#: bound, so a gate behind a lenient server still never scans unbounded input.
MAX_HEADER_BYTES = 64 * 1024
_HANDSHAKE_SCHEMES = {"ws": "http", "wss": "https"}
#: A paid answer is for the payer: shared caches must not hand it to the next caller.
_PRIVATE = ((b"cache-control", b"private"),)
_RECEIPT_RANK = {name.encode("latin-1"): rank for rank, name in enumerate(RECEIPT_HEADERS)}
#: Every request header a gate decides on, in one table so that a header it does not care
#: about costs one dictionary miss: the receipt headers by preference (the lower the
#: better), then the two open-rail credential headers.
_SIGNATURE, _AUTHORIZATION = len(_RECEIPT_RANK), len(_RECEIPT_RANK) + 1
_CREDENTIAL_RANK = {
    **_RECEIPT_RANK,
    b"payment-signature": _SIGNATURE,
    b"authorization": _AUTHORIZATION,
}


class BodyTooLarge(Exception):
    """The request body is longer than the gate will buffer."""


class ClientDisconnected(Exception):
    """The client went away before the whole body arrived."""


def header_map(scope: Scope) -> dict[str, str]:
    """The request headers as ``{lowercase name: value}``; the first of duplicates wins.

    ASGI already lowercases names.  Values are latin-1, as HTTP/1.1 defines them.  Headers
    past :data:`MAX_HEADER_BYTES` are ignored rather than read.
    """
    found: dict[str, str] = {}
    budget = MAX_HEADER_BYTES
    for raw_name, raw_value in scope.get("headers", ()):
        budget -= len(raw_name) + len(raw_value)
        if budget < 0:
            break
        name = raw_name.decode("latin-1")
        if name not in found:
            found[name] = raw_value.decode("latin-1")
    return found


def credential_headers(scope: Scope) -> tuple[tuple[bytes, bytes] | None, bool]:
    """The receipt header a request presents, raw: ``(lowercase name, value)``, and
    whether the request also carries an open-rail credential (``PAYMENT-SIGNATURE``, or
    ``Authorization`` of the ``Payment`` scheme), in one pass over the headers.

    The receipt header is the one :func:`svc.receipts.receipt_id_from_headers` would
    read: the first header present in :data:`~svc.receipts.RECEIPT_HEADERS` order, the
    first of duplicates, within the same :data:`MAX_HEADER_BYTES` bound as
    :func:`header_map`.  The hot path of every gate, so each header costs one dictionary
    lookup beside the byte budget."""
    best: tuple[bytes, bytes] | None = None
    best_rank = _SIGNATURE
    rail = False
    budget = MAX_HEADER_BYTES
    ranks = _CREDENTIAL_RANK
    for raw_name, raw_value in scope.get("headers", ()):
        budget -= len(raw_name) + len(raw_value)
        if budget < 0:
            break
        if raw_name not in ranks:  # most headers: one lookup, no call
            continue
        rank = ranks[raw_name]
        if rank < best_rank:
            best, best_rank = (raw_name, raw_value), rank
        elif rank == _SIGNATURE or (
            rank == _AUTHORIZATION and raw_value[:8].lower() == b"payment "
        ):
            rail = True
    return best, rail


def request_url(scope: Scope, origin: str | None = None) -> str:
    """The absolute URL the client addressed, query included: what an open-rail
    challenge binds, so the challenge and the paid retry must both be read this way.

    ``origin`` (``https://shop.example``) replaces the scope's scheme and ``Host`` when a
    proxy in front of the app changes them; the path is the one the server received.
    """
    if origin is None:
        host = None
        for raw_name, raw_value in scope.get("headers", ()):
            if raw_name == b"host":
                host = raw_value.decode("latin-1")
                break
        if host is None:
            server = scope.get("server")
            host = f"{server[0]}:{server[1]}" if server else "localhost"
        # A WebSocket handshake is an HTTP GET of the same URL: bind it as one, so a
        # challenge got over HTTP pays the handshake too.
        scheme = scope.get("scheme", "http")
        origin = f"{_HANDSHAKE_SCHEMES.get(scheme, scheme)}://{host}"
    raw_path = scope.get("raw_path")
    if raw_path:
        path = raw_path.decode("latin-1")
    else:
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and not path.startswith(root):
            path = root + path
        path = quote(path, safe="/!$&'()*+,;=:@-._~%")
    base = origin.rstrip("/") + path
    query = scope.get("query_string", b"")
    return f"{base}?{query.decode('latin-1')}" if query else base


def route_path(scope: Scope) -> str:
    """The path the app routes on: ``scope["path"]`` without the ``root_path`` prefix.

    The same rule as Starlette's router, so a price written as the app's own route
    (``/v1/report``) matches however the app is mounted.
    """
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :] or "/"
    return path


def request_id_of(scope: Scope) -> str:
    """The request id an outer middleware assigned (``scope["state"]["request_id"]``,
    as the reference server does), else a new one in the service's ``req_…`` form."""
    state = scope.get("state")
    if isinstance(state, MutableMapping):
        found = state.get("request_id")
        if isinstance(found, str) and found:
            return found
    return new_request_id()


def new_request_id() -> str:
    """A new request id in the service's form, ``req_`` and 24 hex digits: the one
    generator, for the reference server's every request and a gate's own answers."""
    return "req_" + secrets.token_hex(12)


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, refusing to buffer more than ``limit`` bytes.

    Raises :class:`BodyTooLarge` as soon as the limit is passed (the rest is never
    read) and :class:`ClientDisconnected` if the client leaves first.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        kind = message["type"]
        if kind == "http.disconnect":
            raise ClientDisconnected
        if kind != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that first yields the already-read ``body``, then defers to the real
    one (so the app still learns of a disconnect)."""
    pending = True

    async def receive_again() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again


def add_paid_headers(
    send: Send,
    added: tuple[tuple[bytes, bytes], ...],
    replaced: frozenset[bytes],
    watched: frozenset[bytes] | None = None,
) -> Send:
    """A ``send`` that adds the ``added`` headers (lowercase names) to the response start,
    and ``Cache-Control: private`` unless the app set a ``Cache-Control``: the ``send`` of
    every request a gate lets through paid, so it does the least it can.  ``added``
    replace any copy of the ``replaced`` names the app set (the gate's word on them is
    final).  Nothing is copied unless the app set one of them; the response start is a
    new message (the app's may be a constant it sends again).

    A plain function returning the server's own awaitable, not a coroutine of its own:
    the app awaits ``send(message)`` as ever, and each message costs no extra coroutine.
    """
    if watched is None:  # may be passed in when already known
        watched = paid_watched(replaced)

    def send_paid(message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            headers = message.get("headers", ())
            if type(headers) is not list:
                headers = list(headers)  # any iterable, read twice below
            private = True
            for name, _ in headers:
                if name not in watched and name.islower():
                    continue  # the usual header: lowercase (as ASGI asks) and not watched
                lowered = name.lower()
                if lowered in watched:
                    if lowered in replaced:
                        private = not any(k.lower() == b"cache-control" for k, _ in headers)
                        headers = [(k, v) for k, v in headers if k.lower() not in replaced]
                        break
                    private = False
            message = {
                **message,
                "headers": [*headers, *added, *_PRIVATE] if private else [*headers, *added],
            }
        return send(message)

    return send_paid


def paid_watched(replaced: frozenset[bytes]) -> frozenset[bytes]:
    """The response header names :func:`add_paid_headers` looks for: ``replaced`` and
    ``cache-control``."""
    return replaced | {b"cache-control"}


async def send_response(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"application/json",
    headers: Iterable[tuple[bytes, bytes]] = (),
    protocol: str = "http",
) -> None:
    """Send one complete response; ``protocol="websocket.http"`` answers a WebSocket
    handshake with it instead of accepting it (the denial response extension)."""
    await send(
        {
            "type": f"{protocol}.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": f"{protocol}.response.body", "body": body, "more_body": False})

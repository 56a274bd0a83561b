"""JSON responses in the service's style: ``ok`` and ``request_id`` in every body."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
from starlette.responses import Response
from starlette.types import Send

from svc.wire import unstructure

from ..domain.errors import DomainError
from .errors import ApiError, http_error

__all__ = ["Reply", "error_response", "json_response", "send_error", "to_json_body"]

RawHeader = tuple[bytes, bytes]


@attrs.define
class Reply:
    """What a route handler returns: a body (dict or svc model), a status, extra headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)
    #: The body holds a credential shown once (a new key or JWT): an idempotent replay
    #: must still return it, so the stored copy is sealed, never kept in the clear.
    secret: bool = False
    #: Work that must run after the transaction commits and outside it (network I/O such
    #: as delivering a webhook now); its reply replaces this one.
    after_commit: Callable[[], Reply] | None = None
    #: Not the ``Idempotency-Key``'s final answer (a payment waiting for a person's
    #: approval, 202): the key's record is left open, so the repeat runs the route again.
    unsettled: bool = False

    @classmethod
    def from_error(cls, error: DomainError) -> Reply:
        """An error answer that still commits the transaction (e.g. a refused payment
        whose ``payment.failed`` event must be kept)."""
        answered = http_error(error)
        body = {"ok": False, "error": answered.body("")["error"]}
        return cls(body, status=answered.status, headers=dict(answered.headers))


def to_json_body(body: Any, request_id: str) -> dict[str, Any]:
    """The success envelope: ``request_id`` is added here, at the top level only.  The
    body is never rewritten below it (a seller's metadata may hold a ``request_id`` key of
    its own); models leave an unset ``request_id`` out themselves (``svc.wire``)."""
    fields = unstructure(body) if attrs.has(type(body)) else dict(body)
    return {"ok": True, **fields, "request_id": request_id}


def json_response(
    data: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(data, separators=(",", ":")),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


async def send_error(send: Send, error: ApiError, request_id: str, header: RawHeader) -> None:
    """``error``'s envelope sent on ``send`` by a middleware, outside any app, with
    ``header`` beside its own."""
    raw = json.dumps(error.body(request_id)).encode()
    length = (b"content-length", str(len(raw)).encode())
    headers = [(b"content-type", b"application/json"), length, header]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


def error_response(error: DomainError, request_id: str) -> Response:
    """The error envelope for ``error``, an HTTP one or a domain one (``http_error``)."""
    answered = http_error(error)
    return json_response(answered.body(request_id), answered.status, answered.headers)

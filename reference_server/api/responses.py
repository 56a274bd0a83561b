"""JSON responses in the service's style: ``ok`` and ``request_id`` in every body."""

from __future__ import annotations

import json
from typing import Any

import attrs
from starlette.responses import Response

from svc._converter import unstructure

from .errors import ApiError

__all__ = ["Reply", "error_response", "json_response", "to_json_body"]


@attrs.define
class Reply:
    """What a route handler returns: a body (dict or svc model), a status, extra headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)


def to_json_body(body: Any, request_id: str) -> dict[str, Any]:
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


def error_response(error: ApiError, request_id: str) -> Response:
    return json_response(error.body(request_id), error.status, error.headers)

"""The input boundary: what every HTTP request must be before any route sees it (the rules:
docs/api.md, "What text the API takes").

A pure ASGI middleware, inside the request-id middleware and outside routing, so one rule
covers every route and a route added tomorrow is covered without a line of its own.  The
headers a request means money by are sent at most once: two ``Authorization`` headers are
two readings of who pays.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ApiError
from .idempotency import validate_key
from .responses import error_response
from .text import first_forbidden, name_of

__all__ = ["SINGLE_HEADERS", "InputBoundaryMiddleware", "check_request"]

#: Headers that carry who pays, in which environment, or a payment: sent at most once.
SINGLE_HEADERS = frozenset(
    {
        b"authorization",
        b"x-svc-environment",
        b"x-svc-vw-key",
        b"idempotency-key",
        b"content-type",
        b"x-svc-receipt",
        b"payment-signature",
        b"payment-receipt",
    }
)


#: Bytes no header value may hold: C0 controls but tab, and DEL.  (Other headers may carry
#: UTF-8 or Latin-1 text, whose bytes overlap C1, so C1 is checked on the money headers only.)
_HEADER_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class InputBoundaryMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                check_request(scope)
            except ApiError as refused:
                request_id = scope.get("state", {}).get("request_id", "")
                await error_response(refused, request_id)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def check_request(scope: Scope) -> None:
    """Raise :class:`ApiError` for the first rule the request's path, query or headers
    break."""
    _check_path(scope)
    _check_query(scope.get("query_string", b""))
    _check_headers(scope.get("headers", []))


def _check_path(scope: Scope) -> None:
    raw = scope.get("raw_path")
    try:
        path = unquote_to_bytes(raw).decode("utf-8") if raw else str(scope["path"])
    except UnicodeDecodeError:
        raise ApiError("invalid_path", "The path is not UTF-8 once percent-decoded.") from None
    bad = first_forbidden(path)
    if bad is not None:
        raise ApiError("invalid_path", f"The path contains the control character {name_of(bad)}.")


def _check_query(query_string: bytes) -> None:
    """Each parameter's name and value, percent-decoded, is UTF-8 without control
    characters; a 422 names every parameter that is not."""
    errors = []
    for part in query_string.split(b"&"):
        if not part:
            continue
        raw_name, _, raw_value = part.partition(b"=")
        name, name_ok = _decode_component(raw_name)
        value, value_ok = _decode_component(raw_value)
        if not (name_ok and value_ok):
            errors.append({"field": name, "message": "must be UTF-8 once percent-decoded"})
            continue
        bad = first_forbidden(name) or first_forbidden(value)
        if bad is not None:
            errors.append({"field": name, "message": f"must not contain {name_of(bad)}"})
    if errors:
        summary = "; ".join(f"{e['field']!r} {e['message']}" for e in errors[:10])
        raise ApiError(
            "validation_error",
            f"Invalid request: query parameter {summary}.",
            details={"errors": errors[:10]},
        )


def _decode_component(raw: bytes) -> tuple[str, bool]:
    """A query name or value as form decoding reads it, and whether it was UTF-8."""
    data = unquote_to_bytes(raw.replace(b"+", b" "))
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def _check_headers(headers: list[tuple[bytes, bytes]]) -> None:
    seen: set[bytes] = set()
    for raw_name, raw_value in headers:
        name = raw_name.lower()
        value = raw_value.decode("latin-1")
        if name in SINGLE_HEADERS:
            if name in seen:
                raise ApiError(
                    "duplicate_header",
                    f"The {name.decode()} header is sent more than once; send it once.",
                    details={"header": name.decode()},
                )
            seen.add(name)
            if name == b"idempotency-key":
                validate_key(value)
            elif not value.isascii() or first_forbidden(value) is not None:
                raise ApiError(
                    "invalid_header",
                    f"The {name.decode()} header must be printable ASCII.",
                    details={"header": name.decode()},
                )
        found = _HEADER_CONTROL.search(raw_value)
        if found is not None:
            raise ApiError(
                "invalid_header",
                f"The {name.decode(errors='replace')} header contains the control "
                f"character {name_of(found.group().decode('latin-1'))}.",
                details={"header": name.decode(errors="replace")},
            )

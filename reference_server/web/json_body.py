"""Reading a JSON request body so that it means exactly one thing, or is refused (the
rules: docs/api.md).

Every route reads its body here, through the one pipeline (:mod:`.endpoint`), so the rules
hold everywhere.  Duplicate keys are refused because ``{"resource_id": A, "resource_id":
B}`` has two readings, and a payment must not depend on which one a parser picks.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from starlette.requests import ClientDisconnect, Request

from svc.wire import nesting_depth

from .errors import ApiError, invalid
from .text import first_forbidden_in_body_text, name_of

__all__ = ["MAX_JSON_DEPTH", "parse_json_body", "read_body", "read_json_body"]

#: No request of this API nests deeper; refusing deeper bodies before parsing keeps the
#: parser's recursion bounded whatever the interpreter's recursion limit (some crypto
#: libraries raise it process-wide, and a deep enough body would then crash the process).
MAX_JSON_DEPTH = 32
_INT64 = 2**63
#: Decimals past a double's exponent would become infinity wherever they are read as one.
_MAX_ADJUSTED_EXPONENT = 308
#: Raw bytes after which a body string may hold a forbidden character: an escape (``\\u``),
#: DEL, a C1 control's UTF-8 lead byte, or the lead byte of an encoded surrogate.  JSON
#: refuses raw C0 controls inside strings itself; without these bytes, no walk is needed.
_SUSPECT_BYTES = (b"\\u", b"\x7f", b"\xc2", b"\xed")


async def read_json_body(request: Request, limit: int) -> Any:
    """The JSON body (``None`` when empty) under the rules above."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return None
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ApiError(
            "unsupported_media_type",
            f"Send the body as JSON with 'Content-Type: application/json' (got {media!r}).",
        )
    return parse_json_body(raw)


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, at most ``limit`` bytes (a hosted gate forwards bytes, not JSON)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError("payload_too_large", f"The body is larger than {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError("payload_too_large", f"The body is larger than {limit} bytes.")
            chunks.append(chunk)
    except ClientDisconnect:
        # The client left mid-body, or the body deadline cut it off (and answered 408):
        # nothing to serve, nothing to log as a server failure.
        raise ApiError(
            "bad_request", "The client closed the connection before the body ended."
        ) from None
    return b"".join(chunks)


def parse_json_body(raw: bytes) -> Any:
    """Parse ``raw`` under the body rules; every way it can fail is an :class:`ApiError`."""
    if nesting_depth(raw, above=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ApiError("invalid_json", f"The body nests deeper than {MAX_JSON_DEPTH} levels.")
    try:
        value = json.loads(
            raw,
            parse_float=_decimal,
            parse_int=_integer,
            parse_constant=_reject_constant,
            object_pairs_hook=_object,
        )
    except _DuplicateKey as exc:
        raise ApiError(
            "duplicate_json_key",
            f"The body repeats the key {exc.key!r} in one object; send each key once.",
            details={"key": exc.key},
        ) from None
    except _NumberOutOfRange as exc:
        raise ApiError(
            "invalid_json",
            f"The body holds the number {exc.text[:40]}, outside what any field takes "
            "(integers within 64 bits, decimals within a double's range).",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ApiError("invalid_json", f"The body is not valid JSON: {exc}") from None
    if any(marker in raw for marker in _SUSPECT_BYTES):
        problems = _text_problems(value, "")
        if problems:
            raise invalid(problems)
    return value


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NumberOutOfRange(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _integer(text: str) -> int:
    # Longer than any 64-bit integer: refuse before int() spends time on the digits.
    if len(text.lstrip("-")) > 19:
        raise _NumberOutOfRange(text)
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise _NumberOutOfRange(text)
    return value


def _decimal(text: str) -> Decimal:
    value = Decimal(text)
    if value and value.adjusted() > _MAX_ADJUSTED_EXPONENT:
        raise _NumberOutOfRange(text)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _text_problems(value: Any, at: str) -> list[dict[str, str]]:
    """Every string or key under ``value`` holding a forbidden character, by field path."""
    problems: list[dict[str, str]] = []
    if isinstance(value, str):
        bad = first_forbidden_in_body_text(value)
        if bad is not None:
            problems.append({"field": at or "body", "message": f"must not contain {name_of(bad)}"})
    elif isinstance(value, dict):
        for key, item in value.items():
            bad = first_forbidden_in_body_text(key)
            if bad is not None:
                problems.append(
                    {"field": at or "body", "message": f"has a key containing {name_of(bad)}"}
                )
                continue
            problems.extend(_text_problems(item, f"{at}.{key}" if at else key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problems.extend(_text_problems(item, f"{at}[{index}]"))
    return problems

"""MCP over streamable HTTP: finding a priced ``tools/call`` and answering it in MCP's terms.

An MCP server takes JSON-RPC messages as ``POST`` bodies on one path (``/mcp``).  To
gate a tool the gate must read that body before the server does, so it buffers it (up
to a bound), decides, and hands the same bytes on.  An unpaid call is not an HTTP 402:
MCP clients surface transport errors as opaque failures, and the model driving the
client would never learn what to pay.  It is answered as the tool's own result, a
``CallToolResult`` with ``isError: true`` and a text naming the resource, the price,
``gate_url`` and ``pay_url``, which MCP hands to the model as it would any tool error.

The answer is JSON (``application/json``) unless the client accepts only
``text/event-stream``, in which case it is one SSE ``message`` event; the ``mcp``
package's client sends ``Accept: application/json, text/event-stream`` and reads both.

JSON the gate cannot read is refused here (it could otherwise be read differently by
the server behind): bodies with duplicate keys or non-standard constants, and batches
that contain a priced call (JSON-RPC batching was dropped from MCP in 2025-06-18).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ._core import RECEIPT_META_KEY, Refusal
from ._prices import PriceTable

__all__ = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "PAYMENT_REQUIRED_META_KEY",
    "PAYMENT_SERVICE_ERROR",
    "ToolCall",
    "error_message",
    "find_tool_call",
    "is_modern",
    "parse_body",
    "priced_calls_in_batch",
    "render",
    "tool_error_message",
    "wants_sse",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
#: JSON-RPC "server error" range: the payment service could not be asked.
PAYMENT_SERVICE_ERROR = -32000
#: ``_meta`` key of the machine-readable 402 details in an unpaid tool result.
PAYMENT_REQUIRED_META_KEY = "svc/payment_required"
_MISSING = object()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"duplicate key {key!r}")
        found[key] = value
    return found


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_body(body: bytes) -> Any:
    """The JSON-RPC body, strictly: raises ``ValueError`` for anything ambiguous."""
    try:
        return json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None


@attrs.frozen
class ToolCall:
    """One ``tools/call`` request in a body."""

    name: object
    #: The JSON-RPC id, or ``_MISSING`` for a notification (no answer expected).
    id: object
    #: ``params._meta["svc/receipt"]`` when present, else ``None``.
    meta_receipt: object

    @property
    def is_notification(self) -> bool:
        return self.id is _MISSING


def find_tool_call(message: object) -> ToolCall | None:
    """The ``tools/call`` in a single JSON-RPC message, ``None`` for anything else."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name: object = None
    meta_receipt: object = None
    if isinstance(params, dict):
        name = params.get("name")
        meta = params.get("_meta")
        if isinstance(meta, dict):
            meta_receipt = meta.get(RECEIPT_META_KEY)
    return ToolCall(name=name, id=message.get("id", _MISSING), meta_receipt=meta_receipt)


def priced_calls_in_batch(batch: list[Any], prices: PriceTable) -> list[ToolCall]:
    """The calls of a batch that a gate would have to decide (priced, or unnamed)."""
    found = []
    for message in batch:
        call = find_tool_call(message)
        if call is not None and (not isinstance(call.name, str) or prices.match_tool(call.name)):
            found.append(call)
    return found


def _id(value: object) -> object:
    return None if value is _MISSING else value


def error_message(request_id: object, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": _id(request_id), "error": error}


def _describe_offer(tool: str, refusal: Refusal) -> str:
    offer = refusal.offer
    if offer is None:  # nothing to buy (not a payable refusal): say no more than that
        return f"Payment required: the tool '{tool}' cannot be bought here."
    details = offer.details()
    price = f"{details['amount']} {details['currency']}"
    if offer.credits is not None:
        price += f" for {details['credits']} {offer.credit_unit or 'credits'}"
    return (
        f"Payment required: the tool '{tool}' costs {price} (resource {offer.resource_id}). "
        f'Pay it with POST /pay {{"resource_id": "{offer.resource_id}"}} using a wallet key '
        f"(or POST /spend/pay-url with its gate_url {offer.gate_url}; a person can pay at "
        f"{offer.pay_url}). "
        f"Then call the tool again with the receipt id in params._meta"
        f'["{RECEIPT_META_KEY}"] or in the X-Svc-Receipt header.'
    )


def tool_error_message(
    call: ToolCall, refusal: Refusal, request_id: str, *, modern: bool
) -> dict[str, Any]:
    """The unpaid call answered as a tool result (``isError: true``) that names what to pay.

    The same details as the HTTP 402 travel in the result's ``_meta`` under
    ``svc/payment_required``, for clients that act on them programmatically.
    """
    tool = str(call.name)
    if refusal.status == 409:
        text = f"The tool '{tool}' is not for sale right now: {refusal.message}"
    elif refusal.reason == "receipt_missing":
        text = _describe_offer(tool, refusal)
    else:
        text = f"{refusal.message} {_describe_offer(tool, refusal)}"
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "isError": True,
        "_meta": {PAYMENT_REQUIRED_META_KEY: refusal.body(request_id)},
    }
    if modern:
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": _id(call.id), "result": result}


def wants_sse(headers: Mapping[str, str]) -> bool:
    """Answer as an SSE event only for a client that does not accept JSON at all."""
    accept = headers.get("accept", "")
    types = {part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()}
    if not types or types & {"*/*", "application/json", "application/*"}:
        return False
    return bool(types & {"text/event-stream", "text/*"})


def is_modern(headers: Mapping[str, str]) -> bool:
    """A 2026-07-28-era request (per-request envelope): its results carry ``resultType``."""
    return headers.get("mcp-protocol-version", "") >= "2026-07-28"


def render(payload: object, headers: Mapping[str, str]) -> tuple[bytes, bytes]:
    """``(content-type, body)`` for a JSON-RPC answer, JSON or one SSE event."""
    data = json.dumps(payload, separators=(",", ":")).encode()
    if wants_sse(headers):
        return b"text/event-stream", b"event: message\r\ndata: " + data + b"\r\n\r\n"
    return b"application/json", data

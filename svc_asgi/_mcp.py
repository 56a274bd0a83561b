"""MCP over streamable HTTP: finding a priced ``tools/call`` and answering it in MCP's terms.

An MCP server takes JSON-RPC messages as ``POST`` bodies on one path (``/mcp``).  To
gate a tool the gate must read that body before the server does, so it buffers it (up
to a bound), decides, and hands the same bytes on.  An unpaid call is not an HTTP 402:
MCP clients surface transport errors as opaque failures, and the model driving the
client would never learn what to pay.  It is answered as the tool's own result, a
``CallToolResult`` with ``isError: true`` and a text naming the resource, the price,
``gate_url`` and ``pay_url``, which MCP hands to the model as it would any tool error.

Open rails: the official MCP payment clients of x402 and MPP carry their credential in
``params._meta`` (``x402/payment``, ``org.paymentauth/credential``).  The gate turns it into
the HTTP credential the service redeems (:func:`rail_credential_headers`), shapes the
service's challenge headers as each client reads them (:func:`rail_tool_error`: x402's
``PaymentRequired`` as the unpaid result's ``structuredContent``, or MPP's ``-32042``
error), buffers the claimed call's answer (:class:`ToolAnswer`) to settle only when the
result's ``isError`` is false, and puts the receipt in the result's ``_meta``
(:func:`receipt_meta`).  All from plain JSON: no x402 or mpp import.

The answer is JSON (``application/json``) unless the client accepts only
``text/event-stream``, in which case it is one SSE ``message`` event; the ``mcp``
package's client sends ``Accept: application/json, text/event-stream`` and reads both.

JSON the gate cannot read is refused here (it could otherwise be read differently by
the server behind): bodies with duplicate keys or non-standard constants, and batches
that contain a priced call (JSON-RPC batching was dropped from MCP in 2025-06-18).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from svc.wire import nesting_depth

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

#: How an unpaid call to a priced tool is answered (see ``PaymentGate``).
McpChallenge = Literal["tool_result", "jsonrpc_error"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
#: JSON-RPC "server error" range: the payment service could not be asked.
PAYMENT_SERVICE_ERROR = -32000
#: ``_meta`` key of the machine-readable 402 details in an unpaid tool result.
PAYMENT_REQUIRED_META_KEY = "svc/payment_required"
#: The deepest body read: checked before parsing, so that a deep body is refused however
#: high another library has set the process's recursion limit (:func:`svc.wire.nesting_depth`).
MAX_DEPTH = 64
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
    if nesting_depth(body, above=MAX_DEPTH) > MAX_DEPTH:
        raise ValueError("nested too deeply")
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
    #: ``params._meta`` when it is an object, else empty.
    meta: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def is_notification(self) -> bool:
        return self.id is _MISSING


def find_tool_call(message: object) -> ToolCall | None:
    """The ``tools/call`` in a single JSON-RPC message, ``None`` for anything else."""
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    return ToolCall(
        name=params.get("name"),
        id=message.get("id", _MISSING),
        meta_receipt=meta.get(RECEIPT_META_KEY),
        meta=meta,
    )


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


# --- the official MCP payment clients: x402's and pympp's (see the module docstring) ----------

#: x402's MCP transport: the payment payload in the call, the settlement in the result.
X402_PAYMENT_META_KEY = "x402/payment"
X402_RESPONSE_META_KEY = "x402/payment-response"
#: MPP's MCP transport (draft-payment-transport-mcp): credential in, receipt out.
MPP_CREDENTIAL_META_KEY = "org.paymentauth/credential"
MPP_RECEIPT_META_KEY = "org.paymentauth/receipt"
#: MPP's JSON-RPC errors: no credential (challenges attached), a refused credential.
MPP_PAYMENT_REQUIRED = -32042
MPP_VERIFICATION_FAILED = -32043

#: An MPP challenge's required string fields, then its optional ones (as MPP orders them).
_MPP_FIELDS = ("id", "realm", "method", "intent")
_MPP_OPTIONAL = ("expires", "description", "digest")
_AUTH_PARAM = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def _b64_json(value: str) -> Any:
    padded = value + "=" * (-len(value) % 4)
    try:
        return json.loads(base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_")))
    except ValueError as exc:
        raise ValueError(f"not base64 JSON: {exc}") from None


def _canonical(value: Any) -> str:
    """JSON in canonical form (JCS for the strings, integers and objects MPP uses)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _b64url(value: Any) -> str:
    return base64.urlsafe_b64encode(_canonical(value).encode()).decode("ascii").rstrip("=")


def rail_credential_headers(call: ToolCall) -> dict[str, str]:
    """The open-rail credential a tool call carries in ``_meta``, as the HTTP header the
    service redeems; empty when there is none.  Raises ``ValueError`` for one that is not
    even shaped like a credential."""
    found: dict[str, str] = {}
    x402 = call.meta.get(X402_PAYMENT_META_KEY)
    if x402 is not None:
        if not isinstance(x402, dict):
            raise ValueError(f'_meta["{X402_PAYMENT_META_KEY}"] must be an x402 payment payload')
        data = json.dumps(x402, separators=(",", ":")).encode()
        found["payment-signature"] = base64.b64encode(data).decode("ascii")
    mpp = call.meta.get(MPP_CREDENTIAL_META_KEY)
    if mpp is not None:
        found["authorization"] = _mpp_authorization(mpp)
    return found


def _mpp_authorization(credential: object) -> str:
    """An MCP credential (the whole challenge echoed) as ``Authorization: Payment``."""
    where = f'_meta["{MPP_CREDENTIAL_META_KEY}"]'
    if not isinstance(credential, dict) or not isinstance(credential.get("challenge"), dict):
        raise ValueError(f"{where} must be an MPP credential with its challenge")
    challenge = credential["challenge"]
    echo: dict[str, Any] = {}
    for field in _MPP_FIELDS:
        if not isinstance(challenge.get(field), str):
            raise ValueError(f"{where}.challenge.{field} must be a string")
        echo[field] = challenge[field]
    if not isinstance(challenge.get("request"), dict):
        raise ValueError(f"{where}.challenge.request must be an object")
    echo["request"] = _b64url(challenge["request"])
    for field in _MPP_OPTIONAL:  # the credential's JSON is canonical: key order is moot
        if challenge.get(field) is not None:
            echo[field] = challenge[field]
    if challenge.get("opaque") is not None:
        echo["opaque"] = _b64url(challenge["opaque"])
    wire: dict[str, Any] = {"challenge": echo, "payload": credential.get("payload")}
    if credential.get("source"):
        wire["source"] = credential["source"]
    return "Payment " + _b64url(wire)


def x402_payment_required(headers: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """x402's ``PaymentRequired`` (the ``PAYMENT-REQUIRED`` challenge header, decoded)."""
    for name, value in headers:
        if name.lower() == "payment-required":
            try:
                decoded = _b64_json(value)
            except ValueError:
                return None
            return decoded if isinstance(decoded, dict) else None
    return None


def mpp_challenges(headers: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """MPP's challenges (``WWW-Authenticate: Payment …``) as its MCP transport has them:
    the auth-params as an object, ``request`` (and ``opaque``) decoded."""
    found = []
    for name, value in headers:
        if name.lower() != "www-authenticate" or value[:8].lower() != "payment ":
            continue
        params = {
            m.group(1).lower(): (
                re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
            )
            for m in _AUTH_PARAM.finditer(value[8:])
        }
        try:
            challenge: dict[str, Any] = {field: params[field] for field in _MPP_FIELDS}
            challenge["request"] = _b64_json(params["request"])
            for field in _MPP_OPTIONAL:
                if field in params:
                    challenge[field] = params[field]
            if "opaque" in params:
                challenge["opaque"] = _b64_json(params["opaque"])
        except (KeyError, ValueError):
            continue
        found.append(challenge)
    return found


def receipt_meta(raw_headers: Sequence[tuple[bytes, bytes]], call: ToolCall) -> dict[str, Any]:
    """A settled payment's receipt headers as the result's ``_meta``: ``svc/receipt``
    (the service receipt id) always, ``x402/payment-response`` for x402 and
    ``org.paymentauth/receipt`` for MPP, each where its client reads it."""
    meta: dict[str, Any] = {}
    for raw_name, raw_value in raw_headers:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "x-svc-receipt":
            meta[RECEIPT_META_KEY] = value
        elif name == "payment-response":
            try:
                meta[X402_RESPONSE_META_KEY] = _b64_json(value)
            except ValueError:
                continue
        elif name == "payment-receipt" and MPP_CREDENTIAL_META_KEY in call.meta:
            try:
                receipt = _b64_json(value)
            except ValueError:
                continue
            if isinstance(receipt, dict):
                meta[MPP_RECEIPT_META_KEY] = _mcp_receipt(receipt, call)
    return meta


def _mcp_receipt(receipt: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """MPP's MCP receipt: the HTTP receipt plus the challenge id and what was settled."""
    credential = call.meta.get(MPP_CREDENTIAL_META_KEY)
    challenge = credential.get("challenge") if isinstance(credential, dict) else None
    challenge = challenge if isinstance(challenge, dict) else {}
    out = dict(receipt)
    out.setdefault("challengeId", challenge.get("id", ""))
    out.setdefault("method", challenge.get("method", ""))
    request = challenge.get("request")
    if isinstance(request, dict) and "settlement" not in out:
        settled = {k: request[k] for k in ("amount", "currency") if k in request}
        if settled:
            out["settlement"] = settled
    return out


def rail_tool_error(
    call: ToolCall,
    refusal: Refusal,
    request_id: str,
    *,
    modern: bool,
    jsonrpc_error: bool,
) -> dict[str, Any]:
    """The refused tool call answered in the form the official payment clients read.

    As a tool result (``jsonrpc_error`` false, x402's form, the default): the svc tool
    error (:func:`tool_error_message`) with x402's ``PaymentRequired`` as its
    ``structuredContent``.  As a JSON-RPC error (MPP's form): ``-32042`` with
    ``data.challenges`` (``-32043`` when an MPP credential was presented and refused),
    the svc details under ``data["svc/payment_required"]``.
    """
    x402 = x402_payment_required(refusal.headers)
    challenges = mpp_challenges(refusal.headers)
    if not jsonrpc_error and MPP_CREDENTIAL_META_KEY not in call.meta:
        answer = tool_error_message(call, refusal, request_id, modern=modern)
        if x402 is not None:
            answer["result"]["structuredContent"] = x402
        return answer
    code = MPP_PAYMENT_REQUIRED
    if MPP_CREDENTIAL_META_KEY in call.meta or refusal.reason != "receipt_missing":
        code = MPP_VERIFICATION_FAILED
    if not challenges:  # nothing MPP can pay: the svc tool error says what can be
        return tool_error_message(call, refusal, request_id, modern=modern)
    data: dict[str, Any] = {
        "httpStatus": refusal.status,
        "challenges": challenges,
        PAYMENT_REQUIRED_META_KEY: refusal.body(request_id),
    }
    if code == MPP_VERIFICATION_FAILED:
        data["failure"] = {"reason": refusal.reason, "detail": refusal.message}
    return error_message(call.id, code, refusal.message, data)


# --- the answer of a claimed (held) tool call ---------------------------------------------------


def find_response(payload: object, request_id: object) -> dict[str, Any] | None:
    """The JSON-RPC response to ``request_id`` in a parsed JSON body (or batch)."""
    items = payload if isinstance(payload, list) else [payload]
    for item in items:
        if (
            isinstance(item, dict)
            and item.get("id", _MISSING) == request_id
            and ("result" in item or "error" in item)
        ):
            return item
    return None


def tool_succeeded(response: Mapping[str, Any] | None) -> bool:
    """A ``tools/call`` answered with a result whose ``isError`` is not true."""
    if response is None:
        return False
    result = response.get("result")
    return isinstance(result, dict) and result.get("isError") is not True


@attrs.define
class ToolAnswer:
    """A tool call's HTTP answer, buffered whole: its status, headers and the JSON-RPC
    response to the call (read from a JSON body or from the SSE events)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    @property
    def is_sse(self) -> bool:
        for name, value in self.headers:
            if name.lower() == b"content-type":
                return value.split(b";")[0].strip().lower() == b"text/event-stream"
        return False

    def response(self, request_id: object) -> dict[str, Any] | None:
        if self.status >= 400:
            return None
        bodies = [data for _, data in _sse_events(self.body)] if self.is_sse else [self.body]
        for body in bodies:
            try:
                found = find_response(json.loads(body), request_id)
            except ValueError:
                continue
            if found is not None:
                return found
        return None

    def with_meta(self, request_id: object, meta: Mapping[str, Any]) -> bytes:
        """The body with ``meta`` merged into the response's ``result._meta``."""

        def patched(payload: Any) -> Any:
            response = find_response(payload, request_id)
            if response is not None and isinstance(response.get("result"), dict):
                result = response["result"]
                existing = result.get("_meta")
                result["_meta"] = {**(existing if isinstance(existing, dict) else {}), **meta}
            return payload

        if not self.is_sse:
            data = json.dumps(patched(json.loads(self.body)), separators=(",", ":"))
            return data.encode()
        out: list[str] = []
        for lines, data in _sse_events(self.body):
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None  # not JSON: the event goes on as it came
            if find_response(payload, request_id) is None:
                out.append("".join(lines))
                continue
            kept = [line for line in lines if not line.startswith("data:") and line.strip()]
            new = json.dumps(patched(payload), separators=(",", ":"))
            out.append("".join(kept) + f"data: {new}\r\n\r\n")
        return "".join(out).encode()


def _sse_events(body: bytes) -> list[tuple[list[str], str]]:
    """The SSE events of a body: each event's lines (with their endings, the blank line
    ending it included) and its data."""
    events: list[tuple[list[str], str]] = []
    lines: list[str] = []
    data: list[str] = []
    for line in body.decode("utf-8", "replace").splitlines(keepends=True):
        lines.append(line)
        stripped = line.rstrip("\r\n")
        if not stripped:
            events.append((lines, "\n".join(data)))
            lines, data = [], []
        elif stripped.startswith("data:"):
            data.append(stripped[5:].removeprefix(" "))
    if lines:
        events.append((lines, "\n".join(data)))
    return events

"""svc.webhooks: the shared signature vectors, properties of sign/verify, and interop.

Every refusal must be a ``WebhookVerificationError``; ``pytest.raises`` lets any other
exception type through as a failure, so the negative tests also prove that.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import pickle
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

import svc
import svc.wire
from svc import webhooks
from svc.webhooks import WebhookVerificationError, sign, verify

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parent / "vectors" / "webhook-signatures.json").read_text("utf-8")
)
SECRET: str = VECTORS["secret"]
TOLERANCE: int = VECTORS["tolerance_seconds"]
CASES: list[dict[str, Any]] = VECTORS["cases"]
NOW = 1_795_003_200
ID_HEADER, TS_HEADER, SIG_HEADER = "X-Svc-Webhook-Id", "X-Svc-Timestamp", "X-Svc-Signature"

# Hypothesis: HMAC is fast, but the first cattrs structuring of a class generates code.
props = settings(deadline=None)


def clock(t: float) -> Callable[[], float]:
    return lambda: t


def independent_hmac(secret: str, webhook_id: str, timestamp: str, body: bytes) -> str:
    """The scheme written out from the spec, sharing no code with svc.webhooks."""
    message = webhook_id.encode("utf-8") + b"." + timestamp.encode("utf-8") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def payment_event(event_id: str = "evt_test_1", **data: Any) -> dict[str, Any]:
    """A payment.succeeded event carrying every field of the spec's table."""
    fields: dict[str, Any] = {
        "ok": True,
        "type": "resource",
        "rail": "x402",
        "receipt_id": "rcpt_1",
        "request_id": "req_1",
        "resource_id": "res_1",
        "short_id": "r1",
        "path_or_tool": "/v1/report",
        "metadata": {"sku_kind": "credit_topup", "credits": 100, "credit_unit": "calls"},
        "seller_id": "sel_1",
        "amount": "0.05",
        "platform_fee": "0.001",
        "processor_payment_intent_id": "pi_1",
        "seller_balance": "12.30",
        "environment": "test",
        "settlement": "processor_deposit",
    }
    fields.update(data)
    return {
        "id": event_id,
        "type": "payment.succeeded",
        "created_at": "2026-11-21T12:00:00Z",
        "data": fields,
    }


def encode(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def delivery(
    document: Any = None,
    *,
    body: bytes | None = None,
    secret: str = SECRET,
    webhook_id: str | None = None,
    timestamp: int = NOW,
) -> tuple[bytes, dict[str, str]]:
    """A correctly signed (body, headers) pair, so each test breaks exactly one thing."""
    if body is None:
        body = encode(payment_event() if document is None else document)
    if webhook_id is None:
        webhook_id = json.loads(body)["id"]
    return body, webhooks.headers(secret, webhook_id=webhook_id, timestamp=timestamp, body=body)


def signed_with_timestamp_text(timestamp: str) -> tuple[bytes, dict[str, str]]:
    """Headers whose signature covers an arbitrary timestamp text (to test its parsing)."""
    body = encode(payment_event())
    return body, {
        ID_HEADER: "evt_test_1",
        TS_HEADER: timestamp,
        SIG_HEADER: "v1," + independent_hmac(SECRET, "evt_test_1", timestamp, body),
    }


def verify_at_now(
    body: bytes, headers: Mapping[str, str], secret: str | list[str] = SECRET
) -> svc.Event:
    return verify(secret, body, headers, now=clock(NOW))


# --- the shared vectors -------------------------------------------------------------------


def test_vectors_describe_this_scheme() -> None:
    assert TOLERANCE == webhooks.DEFAULT_TOLERANCE == 300
    assert len(CASES) >= 9


@pytest.mark.parametrize("case", [c for c in CASES if c["valid"]], ids=lambda c: c["name"])
def test_valid_vector_verifies_to_a_typed_event(case: dict[str, Any]) -> None:
    body = case["body"].encode("utf-8")
    document = json.loads(body)

    event = verify(SECRET, body, case["headers"], tolerance=TOLERANCE, now=clock(case["now"]))

    assert isinstance(event, svc.Event)
    assert event.id == document["id"] == case["headers"][ID_HEADER]
    assert event.type == document["type"]
    assert event.created_at == datetime.fromisoformat(document["created_at"])
    if event.type == "payment.succeeded":
        assert isinstance(event.data, svc.PaymentSucceededData)
        assert event.data.receipt_id == document["data"]["receipt_id"]
        assert event.data.ok is document["data"]["ok"]
        assert event.data.metadata.credits == document["data"]["metadata"]["credits"]


@pytest.mark.parametrize("case", [c for c in CASES if not c["valid"]], ids=lambda c: c["name"])
def test_invalid_vector_is_refused(case: dict[str, Any]) -> None:
    body = case["body"].encode("utf-8")
    with pytest.raises(WebhookVerificationError):
        verify(SECRET, body, case["headers"], tolerance=TOLERANCE, now=clock(case["now"]))


def test_sign_reproduces_the_vector_signature() -> None:
    case = next(c for c in CASES if c["name"] == "valid")
    headers = case["headers"]
    assert headers[SIG_HEADER] == sign(
        SECRET,
        webhook_id=headers[ID_HEADER],
        timestamp=int(headers[TS_HEADER]),
        body=case["body"].encode("utf-8"),
    )


# --- sign and headers ---------------------------------------------------------------------


def test_sign_agrees_with_an_independent_hmac() -> None:
    body = encode(payment_event("evt_interop"))
    ours = sign(SECRET, webhook_id="evt_interop", timestamp=NOW, body=body)
    version, _, hex_digest = ours.partition(",")
    assert version == "v1"
    assert hex_digest == independent_hmac(SECRET, "evt_interop", str(NOW), body)
    assert hex_digest == hex_digest.lower() and len(hex_digest) == 64


def test_verify_accepts_a_signature_computed_independently() -> None:
    body, headers = signed_with_timestamp_text(str(NOW))
    assert verify_at_now(body, headers).id == "evt_test_1"


def test_key_is_the_whole_secret_string_not_base64_decoded() -> None:
    body = b"{}"
    with_prefix = sign("whsec_c2VjcmV0", webhook_id="e", timestamp=1, body=body)
    without_prefix = sign("c2VjcmV0", webhook_id="e", timestamp=1, body=body)
    decoded = hmac.new(b"secret", b"e.1." + body, hashlib.sha256).hexdigest()
    assert with_prefix == "v1," + independent_hmac("whsec_c2VjcmV0", "e", "1", body)
    assert with_prefix != without_prefix
    assert decoded not in (with_prefix[3:], without_prefix[3:])


def test_headers_gives_the_three_delivery_headers() -> None:
    body = encode(payment_event())
    headers = webhooks.headers(SECRET, webhook_id="evt_test_1", timestamp=NOW, body=body)
    assert headers == {
        ID_HEADER: "evt_test_1",
        TS_HEADER: "1795003200",
        SIG_HEADER: sign(SECRET, webhook_id="evt_test_1", timestamp=NOW, body=body),
    }


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"secret": ""}, ValueError),
        ({"secret": b"whsec_x"}, TypeError),
        ({"webhook_id": ""}, ValueError),
        ({"timestamp": -1}, ValueError),
        ({"timestamp": 1.5}, TypeError),
        ({"timestamp": True}, TypeError),
        ({"timestamp": NOW * 1000}, ValueError),
        ({"body": "{}"}, TypeError),
    ],
)
def test_sign_refuses_arguments_no_delivery_could_carry(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    arguments: dict[str, Any] = {"webhook_id": "evt_1", "timestamp": NOW, "body": b"{}", **kwargs}
    with pytest.raises(error):
        sign(arguments.pop("secret", SECRET), **arguments)


def test_headers_refuses_an_id_that_would_inject_a_header() -> None:
    with pytest.raises(ValueError, match="control"):
        webhooks.headers(SECRET, webhook_id="evt\r\nX-Evil: 1", timestamp=NOW, body=b"{}")


# --- verify: what it accepts --------------------------------------------------------------


def test_verify_returns_every_payment_field_typed() -> None:
    body, headers = delivery()
    event = verify_at_now(body, headers)
    data = event.data
    assert isinstance(data, svc.PaymentSucceededData)
    assert data.amount == Decimal("0.05")
    assert data.platform_fee == Decimal("0.001")
    assert data.seller_balance == Decimal("12.30")
    assert data.metadata.sku_kind == "credit_topup"
    assert data.metadata.credits == 100
    assert data.metadata.credit_unit == "calls"
    assert (data.rail, data.environment, data.settlement) == ("x402", "test", "processor_deposit")


def test_the_verified_event_is_an_event_like_any_other() -> None:
    # Its data is typed on first read; until and after, it compares, hashes, prints, copies,
    # pickles and serializes as the Event the converter builds from the same body.
    body, headers = delivery()
    expected = svc.wire.structure(json.loads(body), svc.Event)
    event = verify_at_now(body, headers)
    assert isinstance(event, svc.Event)
    assert event == expected and expected == event
    assert event != attrs.evolve(expected, id="evt_other")
    assert repr(event) == repr(expected)
    assert attrs.evolve(event, type="x") == attrs.evolve(expected, type="x")
    assert pickle.loads(pickle.dumps(verify_at_now(body, headers))) == expected  # noqa: S301 (our own bytes)
    assert copy.deepcopy(verify_at_now(body, headers)) == expected
    assert svc.wire.unstructure(verify_at_now(body, headers)) == svc.wire.unstructure(expected)
    assert attrs.asdict(verify_at_now(body, headers)) == attrs.asdict(expected)
    assert hash(attrs.evolve(event, data=None)) == hash(attrs.evolve(expected, data=None))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.id = "evt_other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = event.not_a_field  # type: ignore[attr-defined]


def test_event_types_without_a_model_keep_their_data_as_json() -> None:
    document = {
        "id": "evt_t",
        "type": "invoice.created",  # not a type this SDK knows (a newer server's)
        "created_at": "2026-11-21T12:00:00Z",
        "data": {"amount": "1.00", "from": "@alice", "nested": [1, {"x": None}]},
    }
    body, headers = delivery(document)
    assert verify_at_now(body, headers).data == document["data"]


HEADER_MAPPINGS: dict[str, Callable[[dict[str, str]], Mapping[str, str]]] = {
    "dict": lambda h: h,
    "lowercase dict": lambda h: {k.lower(): v for k, v in h.items()},
    "uppercase dict": lambda h: {k.upper(): v for k, v in h.items()},
    "starlette Headers": lambda h: Headers(headers={k.lower(): v for k, v in h.items()}),
    "httpx Headers": lambda h: httpx.Headers(h),
    "extra headers": lambda h: {"Content-Type": "application/json", "Host": "x", **h},
    "Flask/werkzeug EnvironHeaders": lambda h: _werkzeug_headers(h),
}


def _werkzeug_headers(headers: dict[str, str]) -> Mapping[str, str]:
    from werkzeug.datastructures import EnvironHeaders

    return EnvironHeaders({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})


@pytest.mark.parametrize("kind", HEADER_MAPPINGS)
def test_headers_are_matched_case_insensitively_in_any_mapping(kind: str) -> None:
    body, headers = delivery()
    assert verify_at_now(body, HEADER_MAPPINGS[kind](headers)).id == "evt_test_1"


@pytest.mark.parametrize("wrap", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_body_may_be_any_bytes_like_object(wrap: Callable[[bytes], Any]) -> None:
    body, headers = delivery()
    assert verify_at_now(wrap(body), headers).id == "evt_test_1"


def test_secret_may_be_a_tuple_while_rotating() -> None:
    body, headers = delivery(secret="whsec_new")
    event = verify(("whsec_old", "whsec_new"), body, headers, now=clock(NOW))
    assert event.id == "evt_test_1"


@pytest.mark.parametrize(
    ("before", "after"),
    [("v2,anything-a-newer-scheme-sends ", ""), ("v1," + "0" * 64 + "   ", " ")],
    ids=["entries of another version beside v1", "extra spaces between signatures"],
)
def test_other_entries_and_extra_spaces_are_ignored(before: str, after: str) -> None:
    body, headers = delivery()
    headers[SIG_HEADER] = before + headers[SIG_HEADER] + after
    assert verify_at_now(body, headers).id == "evt_test_1"


@pytest.mark.parametrize("offset", [-300, -299, 0, 299, 300])
def test_timestamp_at_the_edge_of_the_tolerance_is_accepted(offset: int) -> None:
    body, headers = delivery()
    assert verify(SECRET, body, headers, now=clock(NOW + offset)).id == "evt_test_1"


@pytest.mark.parametrize("offset", [-301, 301, -300.5, 300.5, -(10**9), 10**9])
def test_timestamp_beyond_the_tolerance_is_refused(offset: float) -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError, match="X-Svc-Timestamp is too"):
        verify(SECRET, body, headers, now=clock(NOW + offset))


def test_default_clock_is_the_real_time() -> None:
    now = int(time.time())
    body, headers = delivery(timestamp=now)
    assert verify(SECRET, body, headers).id == "evt_test_1"
    stale_body, stale_headers = delivery(timestamp=now - 3600)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(SECRET, stale_body, stale_headers)


def test_the_error_is_svc_s_own() -> None:
    assert webhooks.WebhookVerificationError is svc.WebhookVerificationError
    assert issubclass(WebhookVerificationError, svc.SvcError)
    assert set(webhooks.__all__) >= {"sign", "headers", "verify", "WebhookVerificationError"}


# --- verify: what it refuses --------------------------------------------------------------


def test_text_body_is_refused_with_a_pointer_to_the_raw_body() -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError, match="raw request body"):
        verify_at_now(body.decode(), headers)  # type: ignore[arg-type]


def _without(name: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda h: {k: v for k, v in h.items() if k != name}


def _with(name: str, value: str) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda h: {**h, name: value}


GOOD_HEX = "0123456789abcdef" * 4
HEADER_DAMAGE: dict[str, tuple[Callable[[dict[str, str]], Any], str]] = {
    "no webhook id": (_without(ID_HEADER), "missing header X-Svc-Webhook-Id"),
    "no timestamp": (_without(TS_HEADER), "missing header X-Svc-Timestamp"),
    "no signature": (_without(SIG_HEADER), "missing header X-Svc-Signature"),
    "no headers at all": (lambda h: {}, "missing header"),
    "empty webhook id": (_with(ID_HEADER, ""), "X-Svc-Webhook-Id is empty"),
    "empty timestamp": (_with(TS_HEADER, ""), "X-Svc-Timestamp is empty"),
    "empty signature": (_with(SIG_HEADER, ""), "X-Svc-Signature is empty"),
    "only spaces in signature": (_with(SIG_HEADER, "   "), "no signature"),
    "duplicate header, two cases": (
        lambda h: {**h, SIG_HEADER.lower(): h[SIG_HEADER]},
        "more than once",
    ),
    "duplicate header, starlette": (
        lambda h: Headers(
            raw=[(k.lower().encode(), v.encode()) for k, v in h.items()]
            + [(SIG_HEADER.lower().encode(), h[SIG_HEADER].encode())]
        ),
        "more than once",
    ),
    "header value not a string": (
        lambda h: {**h, SIG_HEADER: h[SIG_HEADER].encode()},
        "must be a string",
    ),
    "headers not a mapping": (lambda h: list(h.items()), "mapping"),
    "headers is None": (lambda h: None, "mapping"),
    "equals sign": (lambda h: {**h, SIG_HEADER: h[SIG_HEADER].replace(",", "=")}, "comma"),
    "unknown version only": (lambda h: {**h, SIG_HEADER: "v2," + GOOD_HEX}, "version: v2"),
    "no version": (_with(SIG_HEADER, "," + GOOD_HEX), "malformed"),
    "bare hex": (_with(SIG_HEADER, GOOD_HEX), "malformed"),
    "version without signature": (_with(SIG_HEADER, "v1,"), "malformed"),
    "version only": (_with(SIG_HEADER, "v1"), "malformed"),
    "hex too short": (_with(SIG_HEADER, "v1," + GOOD_HEX[:-1]), "64 lowercase hex"),
    "hex too long": (_with(SIG_HEADER, "v1," + GOOD_HEX + "0"), "64 lowercase hex"),
    "not hex": (_with(SIG_HEADER, "v1," + "g" * 64), "64 lowercase hex"),
    "uppercase hex": (
        lambda h: {**h, SIG_HEADER: "v1," + h[SIG_HEADER][3:].upper()},
        "64 lowercase hex",
    ),
    "uppercase version": (lambda h: {**h, SIG_HEADER: "V" + h[SIG_HEADER][1:]}, "malformed"),
    "non-ASCII hex digits": (_with(SIG_HEADER, "v1," + "\u0660" * 64), "64 lowercase hex"),
    "base64 signature (standard-webhooks style)": (
        _with(SIG_HEADER, "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="),
        "64 lowercase hex",
    ),
    "trailing junk after a signature": (
        lambda h: {**h, SIG_HEADER: h[SIG_HEADER] + ",x"},
        "64 lowercase hex",
    ),
    "one malformed entry beside a good one": (
        lambda h: {**h, SIG_HEADER: h[SIG_HEADER] + " v1=" + GOOD_HEX},
        "malformed",
    ),
    "tab-separated signatures": (
        lambda h: {**h, SIG_HEADER: h[SIG_HEADER] + "\tv1," + GOOD_HEX},
        "64 lowercase hex",
    ),
    "signature of another secret": (
        lambda h: {**h, SIG_HEADER: "v1," + GOOD_HEX},
        "no signature in X-Svc-Signature matches",
    ),
    "webhook id not the event id": (_with(ID_HEADER, "evt_other"), "no signature"),
}


@pytest.mark.parametrize("damage", HEADER_DAMAGE)
def test_damaged_headers_are_refused(damage: str) -> None:
    change, message = HEADER_DAMAGE[damage]
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError, match=message):
        verify_at_now(body, change(headers))


def other_digits(text: str, *, zero: int) -> str:
    """``text``'s ASCII digits written in another script's digits."""
    return "".join(chr(zero + int(c)) for c in text)


def test_a_malformed_entry_is_our_error_where_standardwebhooks_raises_valueerror() -> None:
    # The bug DESIGN.md names: standardwebhooks unpacks each entry with
    # ``(version, signature) = entry.split(",")``, so an entry without exactly one comma
    # escapes as ValueError instead of its own verification error.
    from standardwebhooks import Webhook
    from standardwebhooks import WebhookVerificationError as StandardWebhooksError

    now = int(time.time())
    body = encode(payment_event())
    reference = Webhook("whsec_" + "A" * 43)
    with pytest.raises(ValueError) as raised:
        reference.verify(
            body,
            {"webhook-id": "evt_test_1", "webhook-timestamp": str(now), "webhook-signature": "v1"},
        )
    assert not isinstance(raised.value, StandardWebhooksError)

    _, headers = delivery(timestamp=now)
    for entry in ("v1", "v1,a,b", "v1=" + GOOD_HEX):
        with pytest.raises(WebhookVerificationError):
            verify(SECRET, body, {**headers, SIG_HEADER: entry})


BAD_TIMESTAMPS = {
    "ISO 8601": "2026-11-21T12:00:00Z",
    "float": "1795003200.0",
    "exponent": "1e9",
    "negative": "-1795003200",
    "plus sign": "+1795003200",
    "leading space": " 1795003200",
    "trailing space": "1795003200 ",
    "trailing newline": "1795003200\n",
    "underscores": "1_795_003_200",
    "hex": "0x6afd4c80",
    "Arabic-Indic digits": other_digits(str(NOW), zero=0x0660),  # int() takes these
    "fullwidth digits": other_digits(str(NOW), zero=0xFF10),  # and these
    "13 digits": "1" + "0" * 12,
    "5000 digits": "9" * 5000,
    "words": "now",
    "milliseconds": "1795003200000",
}


@pytest.mark.parametrize("text", BAD_TIMESTAMPS.values(), ids=BAD_TIMESTAMPS.keys())
def test_timestamps_that_are_not_plain_unix_seconds_are_refused(text: str) -> None:
    body, headers = signed_with_timestamp_text(text)
    with pytest.raises(WebhookVerificationError, match="integer Unix seconds"):
        verify_at_now(body, headers)


_DEEP = b"[" * 100_000 + b"]" * 100_000
_EVENT = payment_event()
BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "not UTF-8": (b'{"id":"evt_test_1","x":"\xff\xfe"}', "not UTF-8"),
    "not JSON": (b"id=evt_test_1&type=payment.succeeded", "not JSON"),
    "truncated JSON": (encode(_EVENT)[:-1], "not JSON"),
    "a value missing inside": (b'{"id":"evt_test_1","data":}', "not JSON: Expecting value"),
    "a bad value inside": (b'{"id":"evt_test_1","data":[1,]}', "not JSON: Expecting value"),
    "cut after a key": (b'{"id":', "not JSON: Expecting value"),
    "data after the object": (encode(_EVENT) + b" x", "not JSON: Extra data"),
    "empty": (b"", "not JSON"),
    "NaN": (encode(_EVENT)[:-1] + b',"x":NaN}', "not JSON"),
    "integer too long to parse": (encode(_EVENT)[:-1] + b',"x":' + b"9" * 5000 + b"}", "JSON"),
    "nested too deeply": (_DEEP, "too deeply"),
    "JSON array": (b"[]", "not a JSON object"),
    "JSON string": (b'"evt_test_1"', "not a JSON object"),
    "JSON null": (b"null", "not a JSON object"),
    "no id": (encode({k: v for k, v in _EVENT.items() if k != "id"}), "'id'"),
    "id not a string": (encode({**_EVENT, "id": 1}), "'id'"),
    "no type": (encode({k: v for k, v in _EVENT.items() if k != "type"}), "'type'"),
    "empty type": (encode({**_EVENT, "type": ""}), "'type'"),
    "no created_at": (encode({k: v for k, v in _EVENT.items() if k != "created_at"}), "created"),
    "created_at a number": (encode({**_EVENT, "created_at": 1795003200}), "created_at"),
    "no data": (encode({k: v for k, v in _EVENT.items() if k != "data"}), "'data'"),
    "id differs from header": (encode({**_EVENT, "id": "evt_other"}), "does not match"),
    "created_at not a date": (encode({**_EVENT, "created_at": "yesterday"}), "could not be read"),
}

# Signed events whose envelope is fine but whose data the SDK cannot read: verify returns the
# event (its id and type are usable, to dedupe or to skip a type), and reading ``data``
# raises the verification error, every time it is read.
BAD_DATA: dict[str, tuple[bytes, str]] = {
    "data null": (encode({**_EVENT, "data": None}), "could not be read"),
    "data a list": (encode({**_EVENT, "data": [1]}), "could not be read"),
    "amount not a number": (encode(payment_event(amount="abc")), "could not be read"),
    "amount with 7 places": (encode(payment_event(amount="0.0000001")), "could not be read"),
    "receipt_id missing": (
        encode({**_EVENT, "data": {k: v for k, v in _EVENT["data"].items() if k != "receipt_id"}}),
        r"\$\.data\.receipt_id",
    ),
    "metadata a list": (encode(payment_event(metadata=[1])), "could not be read"),
    "credits not a number": (
        encode(payment_event(metadata={"credits": "lots"})),
        "could not be read",
    ),
}


@pytest.mark.parametrize("name", BAD_BODIES)
def test_bodies_that_are_not_one_readable_event_are_refused(name: str) -> None:
    body, message = BAD_BODIES[name]
    _, headers = delivery(body=body, webhook_id="evt_test_1")
    with pytest.raises(WebhookVerificationError, match=message):
        verify_at_now(body, headers)


def test_a_deep_body_is_refused_where_a_library_raised_the_recursion_limit() -> None:
    """py_ecc (under eth-account, which x402 and pympp import) sets the limit to 100 000
    process-wide; there the parser overflowed the C stack on a deep body and killed the
    receiver instead of raising.  The depth is now checked before parsing."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        _, headers = delivery(body=_DEEP, webhook_id="evt_test_1")
        with pytest.raises(WebhookVerificationError, match="too deeply"):
            verify_at_now(_DEEP, headers)
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("name", BAD_DATA)
def test_event_data_that_cannot_be_read_is_refused_when_read(name: str) -> None:
    body, message = BAD_DATA[name]
    _, headers = delivery(body=body, webhook_id="evt_test_1")
    event = verify_at_now(body, headers)
    assert (event.id, event.type) == ("evt_test_1", "payment.succeeded")
    for _ in range(2):
        with pytest.raises(WebhookVerificationError, match=message):
            _ = event.data


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ([], "no signing secret"),
        ((), "no signing secret"),
        ("", "non-empty"),
        ([SECRET, ""], "non-empty"),
        ([SECRET, 3], "non-empty"),
        (b"whsec_bytes", "signing secret string"),
        (None, "signing secret string"),
        (42, "signing secret string"),
        ("whsec_\ud800", "not valid text"),
    ],
)
def test_unusable_secrets_are_refused(secret: Any, message: str) -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError, match=message):
        verify(secret, body, headers, now=clock(NOW))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tolerance": -1}, "tolerance"),
        ({"tolerance": True}, "tolerance"),
        ({"tolerance": 1.5}, "tolerance"),
        ({"now": clock(float("nan"))}, "non-finite"),
        ({"now": clock(float("inf"))}, "non-finite"),
        ({"now": lambda: "1795003200"}, "number"),
    ],
)
def test_unusable_tolerance_or_clock_is_refused(kwargs: dict[str, Any], message: str) -> None:
    body, headers = delivery()
    kwargs.setdefault("now", clock(NOW))
    with pytest.raises(WebhookVerificationError, match=message):
        verify(SECRET, body, headers, **kwargs)


def test_webhook_id_that_is_not_encodable_text_is_refused() -> None:
    body, headers = delivery()
    headers[ID_HEADER] = "evt_\udc80"
    with pytest.raises(WebhookVerificationError, match="not valid text"):
        verify_at_now(body, headers)


# --- properties ---------------------------------------------------------------------------

ids = st.text(min_size=1, max_size=40)
secrets = st.text(min_size=1, max_size=40)
timestamps = st.integers(min_value=0, max_value=10**12 - 1)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
# Types the SDK has no model for (every type the service emits has one: see
# tests/test_event_models.py), so their data stays arbitrary JSON.
other_types = st.sampled_from(["x.future", "invoice.created", "acme.custom.event"])
amounts = st.decimals(
    min_value=0, max_value=10**9, places=6, allow_nan=False, allow_infinity=False
).map(lambda d: format(d, "f"))


@st.composite
def events(draw: st.DrawFn, event_id: str | None = None) -> dict[str, Any]:
    """Any event: an untyped one with arbitrary JSON data, or a payment.succeeded one."""
    eid = draw(ids) if event_id is None else event_id
    created = draw(st.datetimes(timezones=st.none() | st.just(UTC))).isoformat()
    if draw(st.booleans()):
        return {
            "id": eid,
            "type": draw(other_types),
            "created_at": created,
            "data": draw(json_values),
        }
    document = payment_event(
        eid,
        amount=draw(amounts),
        receipt_id=draw(ids),
        metadata={"sku_kind": "credit_topup", "credits": draw(st.integers(0, 10**9)), "k": "v"},
    )
    document["created_at"] = created
    return document


def dumps_any_style(document: Any, ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(document, ensure_ascii=ascii_only, separators=separators).encode("utf-8")


@props
@given(
    secret=secrets,
    timestamp=timestamps,
    document=events(),
    ascii_only=st.booleans(),
    spaced=st.booleans(),
)
def test_round_trip_sign_then_verify(
    secret: str, timestamp: int, document: dict[str, Any], ascii_only: bool, spaced: bool
) -> None:
    body = dumps_any_style(document, ascii_only, spaced)
    headers = {
        ID_HEADER: document["id"],
        TS_HEADER: str(timestamp),
        SIG_HEADER: sign(secret, webhook_id=document["id"], timestamp=timestamp, body=body),
    }

    event = verify(secret, body, headers, now=clock(timestamp))

    assert event.id == document["id"]
    assert event.type == document["type"]
    assert event.created_at == datetime.fromisoformat(document["created_at"])
    if document["type"] == "payment.succeeded":
        assert isinstance(event.data, svc.PaymentSucceededData)
        assert event.data.amount == Decimal(document["data"]["amount"])
        assert event.data.receipt_id == document["data"]["receipt_id"]
    else:
        assert event.data == document["data"]


@props
@given(document=events(event_id="evt_mutate"), data=st.data())
def test_any_single_byte_change_to_the_body_is_refused(
    document: dict[str, Any], data: st.DataObject
) -> None:
    body, headers = delivery(document)
    index = data.draw(st.integers(0, len(body) - 1), label="index")
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != body[index]), label="byte")
    mutated = body[:index] + bytes([byte]) + body[index + 1 :]
    with pytest.raises(WebhookVerificationError):
        verify_at_now(mutated, headers)


@props
@given(name=st.sampled_from([SIG_HEADER, ID_HEADER, TS_HEADER]), data=st.data())
def test_any_single_character_change_to_a_header_is_refused(name: str, data: st.DataObject) -> None:
    body, headers = delivery()
    value = headers[name]
    index = data.draw(st.integers(0, len(value) - 1), label="index")
    char = data.draw(st.characters().filter(lambda c: c != value[index]), label="char")
    headers[name] = value[:index] + char + value[index + 1 :]
    with pytest.raises(WebhookVerificationError):
        verify_at_now(body, headers)


@props
@given(
    tolerance=st.integers(0, 3600),
    offset=st.integers(-(10**6), 10**6) | st.floats(-5000, 5000),
)
def test_timestamps_are_accepted_exactly_within_the_tolerance(
    tolerance: int, offset: float
) -> None:
    body, headers = delivery()
    current = NOW + offset
    now = clock(current)
    if abs(current - NOW) <= tolerance:
        assert verify(SECRET, body, headers, tolerance=tolerance, now=now).id == "evt_test_1"
    else:
        with pytest.raises(WebhookVerificationError, match="X-Svc-Timestamp is too"):
            verify(SECRET, body, headers, tolerance=tolerance, now=now)


any_text = st.text(st.characters(exclude_categories=()))  # surrogates included


@props
@given(name=st.sampled_from([SIG_HEADER, ID_HEADER, TS_HEADER]), garbage=any_text)
def test_garbage_in_a_header_raises_only_the_verification_error(name: str, garbage: str) -> None:
    body, headers = delivery()
    original = headers[name]
    headers[name] = garbage
    try:
        verify_at_now(body, headers)
    except WebhookVerificationError:
        return
    assert garbage == original


@props
@given(
    garbage=st.fixed_dictionaries({}, optional={ID_HEADER: any_text, TS_HEADER: any_text})
    | st.dictionaries(any_text, any_text, max_size=5),
    body=st.binary(max_size=200),
)
def test_garbage_headers_and_body_raise_only_the_verification_error(
    garbage: dict[str, str], body: bytes
) -> None:
    with pytest.raises(WebhookVerificationError):
        verify_at_now(body, garbage)


garbage_documents = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"id": st.just("evt_g")},
        optional={
            "type": st.sampled_from(["payment.succeeded", "payment.failed"]) | json_values,
            "created_at": st.sampled_from(["2026-11-21T12:00:00Z", "2026-13-01", ""]) | json_values,
            "data": st.dictionaries(
                st.sampled_from(["ok", "type", "rail", "receipt_id", "amount", "metadata"])
                | st.text(max_size=5),
                json_values,
            )
            | json_values,
        },
    ),
)


@props
@given(
    body=st.binary(max_size=300) | garbage_documents.map(encode),
    timestamp=timestamps,
)
def test_signed_garbage_bodies_give_an_event_or_the_verification_error(
    body: bytes, timestamp: int
) -> None:
    # Properly signed, so each body reaches decoding, the event checks and the converter.
    _, headers = delivery(body=body, webhook_id="evt_g", timestamp=timestamp)
    try:
        event = verify(SECRET, body, headers, now=clock(timestamp))
        _ = event.data  # typed on first read: refused then, or readable
    except WebhookVerificationError:
        return
    assert isinstance(event, svc.Event) and event.id == "evt_g"


@props
@given(
    receiver=st.lists(secrets, min_size=1, max_size=4, unique=True),
    strangers=st.lists(secrets, max_size=3, unique=True),
    data=st.data(),
)
def test_rotation_accepts_any_signature_of_any_current_secret(
    receiver: list[str], strangers: list[str], data: st.DataObject
) -> None:
    strangers = [s for s in strangers if s not in receiver]
    signers = data.draw(st.lists(st.sampled_from(receiver), unique=True), label="signers")
    body = encode(payment_event("evt_rot"))
    entries = [sign(s, webhook_id="evt_rot", timestamp=NOW, body=body) for s in signers + strangers]
    entries = data.draw(st.permutations(entries), label="order")
    headers = {ID_HEADER: "evt_rot", TS_HEADER: str(NOW), SIG_HEADER: " ".join(entries)}

    if signers:
        assert verify_at_now(body, headers, secret=receiver).id == "evt_rot"
    else:
        with pytest.raises(WebhookVerificationError):
            verify_at_now(body, headers, secret=receiver)


# --- the receiver of docs/webhooks.md -----------------------------------------------------


def make_receiver(secrets: list[str], credited: dict[str, int]) -> Starlette:
    """The Starlette receiver shown in docs/webhooks.md, with an in-memory credit store."""

    async def svc_webhook(request: Request) -> Response:
        body = await request.body()  # raw bytes, never request.json()
        try:
            event = webhooks.verify(secrets, body, request.headers)
        except webhooks.WebhookVerificationError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        if event.type == "payment.succeeded":
            data = event.data
            if data.metadata.sku_kind == "credit_topup" and data.metadata.credits:
                # receipt_id is the dedupe key (spec, Events > Delivery rule 7)
                credited.setdefault(data.receipt_id, int(data.metadata.credits))
        return Response(status_code=204)

    return Starlette(routes=[Route("/svc/webhooks", svc_webhook, methods=["POST"])])


def test_documented_starlette_receiver() -> None:
    credited: dict[str, int] = {}
    client = TestClient(make_receiver(["whsec_new", "whsec_old"], credited))
    body = encode(payment_event("evt_doc", receipt_id="rcpt_doc"))
    headers = webhooks.headers(
        "whsec_old", webhook_id="evt_doc", timestamp=int(time.time()), body=body
    )

    first = client.post("/svc/webhooks", content=body, headers=headers)
    retried = client.post("/svc/webhooks", content=body, headers=headers)
    tampered = client.post("/svc/webhooks", content=body.replace(b"100", b"900"), headers=headers)
    unsigned = client.post("/svc/webhooks", content=body)

    assert (first.status_code, retried.status_code) == (204, 204)
    assert credited == {"rcpt_doc": 100}
    assert tampered.status_code == 400
    assert "no signature" in tampered.json()["error"]
    assert unsigned.status_code == 400
    assert "missing header" in unsigned.json()["error"]

"""Sign and verify the service's webhook deliveries.

Every delivery is a ``POST`` whose body is one JSON event (``id``, ``type``, ``created_at``,
``data``) and whose headers are::

    X-Svc-Webhook-Id:  evt_01JD7Q4V              (equals the event's "id")
    X-Svc-Timestamp:   1795003200                (integer Unix seconds)
    X-Svc-Signature:   v1,<lowercase hex>        (one or more, space-separated)

The hex is HMAC-SHA256 keyed with the UTF-8 bytes of the endpoint's signing secret, exactly
as ``POST /webhooks`` returned it (``whsec_`` prefix included, nothing base64-decoded), over
the bytes ``{webhook id}.{timestamp}.{raw body}``.

A receiver needs a few lines and no server dependencies::

    from svc import webhooks

    event = webhooks.verify(secret, raw_body, request_headers)  # svc.Event, typed data

:func:`verify` raises :class:`WebhookVerificationError` for every input it refuses, and
nothing else, so one ``except`` clause turns every bad delivery into a 400.  :func:`sign` and
:func:`headers` are the sending side; the reference server delivers with them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import json.scanner
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn, Protocol

from cattrs import transform_error
from cattrs.errors import BaseValidationError

from . import _webhook_headers
from ._errors import WebhookVerificationError
from ._models import EVENT_DATA_TYPES, Event
from ._webhook_headers import SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK_ID_HEADER
from .wire import nesting_depth, structure


class HeadersLike(Protocol):
    """Request headers as any framework gives them: a dict, Starlette's or httpx's
    ``Headers``, Werkzeug's ``EnvironHeaders`` (Flask)... anything with ``items()``."""

    def items(self) -> Iterable[tuple[str, str]]: ...


__all__ = [
    "DEFAULT_TOLERANCE",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WEBHOOK_ID_HEADER",
    "HeadersLike",
    "WebhookVerificationError",
    "headers",
    "sign",
    "verify",
]


#: Seconds a delivery's timestamp may differ from the receiver's clock, either way (spec).
DEFAULT_TOLERANCE = 300

_VERSION = "v1"
_SIGNATURE_PREFIX = _VERSION + ","
# Unix seconds as plain ASCII digits.  ``int()`` alone would also take "+5", " 5", "5_0" and
# non-ASCII digits such as Arabic-Indic ones; twelve digits reach the year 33658 and keep
# the arithmetic far from float overflow.
_TIMESTAMP_DIGITS = 12
_MAX_TIMESTAMP = 10**12
_HEX_SIGNATURE_RE = re.compile(r"[0-9a-f]{64}")
_ONE_ENTRY_LENGTH = len(_SIGNATURE_PREFIX) + 64
_VERSION_RE = re.compile(r"v[0-9]{1,4}")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


# --- sending ------------------------------------------------------------------------------


def sign(secret: str, *, webhook_id: str, timestamp: int, body: bytes) -> str:
    """Return the ``X-Svc-Signature`` value ``"v1,<lowercase hex>"`` for one delivery.

    ``body`` must be the exact bytes that will be sent: the receiver hashes what arrives on
    the wire, so a body serialized twice (even to "the same" JSON) would not verify.

    Raises :class:`TypeError` / :class:`ValueError` for arguments no delivery could carry
    (an empty secret or id, a timestamp that is not integer Unix seconds, a text body).
    """
    return _SIGNATURE_PREFIX + _digest(
        _secret_key(secret), _signed_prefix(webhook_id, timestamp), _as_bytes(body)
    )


def headers(secret: str, *, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three signature headers of one delivery, ready to merge into the request.

    ``timestamp`` is integer Unix seconds and is written as a decimal string.
    """
    signature = sign(secret, webhook_id=webhook_id, timestamp=timestamp, body=body)
    if _CONTROL_RE.search(webhook_id):
        raise ValueError("webhook_id must not contain control characters (it is a header)")
    return {
        WEBHOOK_ID_HEADER: webhook_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature,
    }


def _secret_key(secret: str) -> bytes:
    if not isinstance(secret, str):
        raise TypeError(
            "secret must be the signing secret string as POST /webhooks returned it, "
            f"not {type(secret).__name__}"
        )
    if not secret:
        raise ValueError("secret must not be empty")
    # The whole string, prefix included, is the key; it is never base64-decoded.
    return secret.encode("utf-8")


def _signed_prefix(webhook_id: str, timestamp: int) -> bytes:
    if not isinstance(webhook_id, str) or not webhook_id:
        raise ValueError("webhook_id must be a non-empty string")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError("timestamp must be integer Unix seconds")
    if timestamp < 0:
        raise ValueError("timestamp must not be negative")
    if timestamp >= _MAX_TIMESTAMP:
        raise ValueError("timestamp must be Unix seconds (this looks like milliseconds)")
    return f"{webhook_id}.{timestamp}.".encode()


def _as_bytes(body: bytes) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    raise TypeError(f"body must be bytes, not {type(body).__name__}")


def _digest(key: bytes, prefix: bytes, body: bytes) -> str:
    mac = hmac.new(key, prefix, hashlib.sha256)
    mac.update(body)
    return mac.hexdigest()


# --- receiving ----------------------------------------------------------------------------


def verify(
    secret: str | Sequence[str],
    body: bytes,
    headers: HeadersLike,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: Callable[[], float] | None = None,
) -> Event:
    """Check a delivery's signature and timestamp, then return its typed :class:`svc.Event`.

    ``secret``
        The endpoint's signing secret, or several while rotating: the delivery is accepted
        when *any* ``v1`` entry of ``X-Svc-Signature`` matches *any* of them.
    ``body``
        The raw request body bytes, exactly as received (``await request.body()`` in
        Starlette).  The signature covers those bytes; text or re-serialized JSON may differ
        by a single space or escape and then never verifies, so ``str`` is refused.
    ``headers``
        Any mapping of the request headers (``dict``, Starlette or httpx ``Headers``...);
        names are matched case-insensitively.  A header sent twice is refused.
    ``tolerance``
        Seconds ``X-Svc-Timestamp`` may be away from ``now()`` in the past *or* the future.
        Together with the signature this stops a captured delivery from being replayed
        later; dedupe on the event ``id`` (or, for credit top-ups, ``data.receipt_id``)
        to stop replays inside the window too.
    ``now``
        Clock returning Unix seconds; ``time.time`` by default.  Injected in tests.

    Signatures are compared with :func:`hmac.compare_digest`, whose running time does not
    depend on how many leading characters match, so a forger learns nothing from timing.

    Raises :class:`WebhookVerificationError`, and only that, for anything refused:
    missing, empty, duplicated or malformed headers, a bad or stale timestamp, no matching
    signature, a body that is not UTF-8 JSON for one event, an event id that differs from
    ``X-Svc-Webhook-Id``, or a ``created_at`` that is not a timestamp.

    The event's ``data`` is typed when first read, not here: a receiver that only looks at
    ``id`` and ``type`` (to dedupe, or to ignore a type) pays nothing for it.  Reading
    ``event.data`` of a correctly signed event whose data the SDK cannot read raises the
    same :class:`WebhookVerificationError` ("could not be read"), on every read.
    """
    keyed = _KEYED.get(secret) if type(secret) is str else None
    macs = None if keyed is not None else _keyed_macs(secret)
    raw = body if type(body) is bytes else _raw_body(body)
    found = (
        _webhook_headers.from_dict(headers)
        if type(headers) is dict
        else _webhook_headers.from_raw(headers)
    )
    webhook_id, timestamp_text, signature_text = found or _webhook_headers.read(headers)
    if (
        len(signature_text) == _ONE_ENTRY_LENGTH
        and signature_text.startswith(_SIGNATURE_PREFIX)
        and signature_text.isascii()
    ):
        # The usual: one v1 entry.  Its hex is not checked here: a value that matches our
        # hex digest is well formed, and one that does not is parsed below for the error.
        signatures = None
        signature = signature_text[len(_SIGNATURE_PREFIX) :]
    else:
        signatures = _parse_signatures(signature_text)
    if (
        now is None
        and type(tolerance) is int
        and tolerance >= 0
        and len(timestamp_text) <= _TIMESTAMP_DIGITS
        and timestamp_text.isdigit()
        and timestamp_text.isascii()
    ):
        # The usual arguments, checked as _check_timestamp does; time.time() is a finite float.
        timestamp = int(timestamp_text)
        current = time.time()
        if abs(current - timestamp) > tolerance:
            _fail_window(timestamp, current, tolerance)
    else:
        _check_timestamp(timestamp_text, tolerance, now)

    try:
        prefix = f"{webhook_id}.{timestamp_text}.".encode()
    except UnicodeEncodeError:
        _fail(f"{WEBHOOK_ID_HEADER} is not valid text")
    if macs is None and signatures is None:  # one secret, one entry: the usual
        mac = keyed.copy()  # type: ignore[union-attr]
        mac.update(prefix)
        mac.update(raw)
        # Both sides are 64 ASCII characters here; compare_digest is constant time.
        matched = hmac.compare_digest(mac.hexdigest(), signature)
    else:
        matched = _any_matches(
            macs or [keyed],  # type: ignore[list-item]
            signatures or [signature],
            prefix,
            raw,
        )
    if not matched:
        if signatures is None:
            _parse_signatures(signature_text)  # a malformed entry is worded as such
        _fail("no signature in X-Svc-Signature matches the signing secret")

    return _read_event(raw, webhook_id)


def _fail(message: str) -> NoReturn:
    raise WebhookVerificationError(message)


def _any_matches(macs: list[hmac.HMAC], signatures: list[str], prefix: bytes, raw: bytes) -> bool:
    """Whether any signature is the digest under any secret: every pair is compared, in
    constant time, so the time taken does not tell which (if any) matched."""
    matched = False
    for keyed in macs:
        mac = keyed.copy()
        mac.update(prefix)
        mac.update(raw)
        expected = mac.hexdigest()
        for candidate in signatures:
            matched |= hmac.compare_digest(expected, candidate)
    return matched


# A receiver verifies every delivery with the same one or two secrets: the HMAC keyed with
# each is kept and copied per delivery (an OpenSSL state copy) instead of being keyed again.
# Bounded, so a receiver handed ever-new secrets does not grow it without end.
_KEYED: dict[str, hmac.HMAC] = {}
_KEYED_MAX = 64


def _keyed_macs(secret: str | Sequence[str]) -> list[hmac.HMAC]:
    if isinstance(secret, str):
        keyed = _KEYED.get(secret)
        if keyed is not None:
            return [keyed]
        secrets: list[object] = [secret]
    elif isinstance(secret, bytes | bytearray | memoryview) or not isinstance(secret, Sequence):
        _fail(
            "secret must be the signing secret string (or a sequence of them while rotating), "
            f"not {type(secret).__name__}"
        )
    else:
        secrets = list(secret)
    if not secrets:
        _fail("no signing secret given")
    macs: list[hmac.HMAC] = []
    for item in secrets:
        if not isinstance(item, str) or not item:
            _fail("every signing secret must be a non-empty string")
        keyed = _KEYED.get(item)
        if keyed is None:
            try:
                key = item.encode("utf-8")
            except UnicodeEncodeError:
                _fail("a signing secret is not valid text")
            keyed = hmac.new(key, digestmod=hashlib.sha256)
            if len(_KEYED) >= _KEYED_MAX:
                _KEYED.clear()
            _KEYED[item] = keyed
        macs.append(keyed)
    return macs


def _raw_body(body: bytes) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        _fail(
            "body must be the raw request body bytes (e.g. `await request.body()`), not str: "
            "the signature covers the exact bytes sent, which decoded or re-serialized text "
            "may not reproduce"
        )
    _fail(f"body must be the raw request body bytes, not {type(body).__name__}")


def _parse_signatures(value: str) -> list[str]:
    """The hex of every ``v1`` entry; entries of a later well-formed version are skipped."""
    signatures: list[str] = []
    other_versions: list[str] = []
    entries = [entry for entry in value.split(" ") if entry]
    if not entries:
        _fail(f"header {SIGNATURE_HEADER} holds no signature")
    for entry in entries:
        version, comma, signature = entry.partition(",")
        if not comma:
            hint = " (a comma, not '=')" if "=" in entry else ""
            _fail(f"malformed entry in {SIGNATURE_HEADER}: expected v1,<hex>{hint}")
        if version == _VERSION:
            if not _HEX_SIGNATURE_RE.fullmatch(signature):
                _fail(
                    f"malformed v1 entry in {SIGNATURE_HEADER}: "
                    "expected 64 lowercase hex characters"
                )
            signatures.append(signature)
        elif _VERSION_RE.fullmatch(version):
            # A newer sender may add entries of another scheme beside v1; they do not count.
            other_versions.append(version)
        else:
            _fail(f"malformed entry in {SIGNATURE_HEADER}: expected v1,<hex>")
    if not signatures:
        _fail(
            f"{SIGNATURE_HEADER} has no v1 signature "
            f"(unsupported version: {', '.join(sorted(set(other_versions)))})"
        )
    return signatures


def _check_timestamp(text: str, tolerance: int, now: Callable[[], float] | None) -> None:
    """``X-Svc-Timestamp`` as integer Unix seconds, within ``tolerance`` of ``now()``
    (``bool`` is refused although it is an ``int``): :func:`verify`'s path for an injected
    clock or unusual arguments."""
    # ASCII digits only (str.isdigit alone admits other scripts' digits), at most 12.
    if not (len(text) <= _TIMESTAMP_DIGITS and text.isascii() and text.isdigit()):
        _fail(f"header {TIMESTAMP_HEADER} must be integer Unix seconds (ASCII digits)")
    timestamp = int(text)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
        _fail("tolerance must be a non-negative number of seconds")
    current = time.time() if now is None else now()
    if isinstance(current, bool) or not isinstance(current, int | float):
        _fail("now() must return Unix seconds as a number")
    if not math.isfinite(current):
        _fail("now() returned a non-finite time")
    if abs(current - timestamp) > tolerance:
        _fail_window(timestamp, current, tolerance)


def _fail_window(timestamp: int, current: float, tolerance: int) -> NoReturn:
    direction = "old" if timestamp < current else "far in the future"
    _fail(
        f"{TIMESTAMP_HEADER} is too {direction}: "
        f"{abs(current - timestamp):.0f} s away, tolerance is {tolerance} s"
    )


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# One decoder for every call: ``json.loads`` with any keyword builds a new one each time.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: The deepest event body read, checked before parsing: the parser recurses, and a library
#: in the same process may have raised the recursion limit (:func:`svc.wire.nesting_depth`).
MAX_DEPTH = 64
# What the decoder itself scans with (typeshed's stub wants a scanner as the context; CPython
# takes the decoder, as JSONDecoder.__init__ does).
_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_ENVELOPE_TEXT = ("id", "type", "created_at")


def _decode(raw: bytes) -> Any:
    """The body as JSON: UTF-8 text, strict JSON (no NaN or Infinity); the slow path of
    :func:`_read_event`, which words the error."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        _fail("body is not UTF-8")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        _fail("body JSON is nested too deeply")
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, over-long integers
        _fail(f"body is not JSON: {exc}")


def _read_event(raw: bytes, webhook_id: str) -> Event:
    """The event of a verified body: its envelope checked (``id`` matching the header,
    ``type``, ``created_at``, ``data``), its ``data`` left to be typed on first read."""
    if nesting_depth(raw, above=MAX_DEPTH) > MAX_DEPTH:
        _fail("body JSON is nested too deeply")
    try:
        # The usual body, one compact JSON value: the decoder's scanner directly, without
        # the Python layers around it.  Anything else (not UTF-8, bad JSON, data after the
        # value, too deep) is decoded again by _decode, which words the error.
        text = raw.decode("utf-8")
        document, end = _SCAN_ONCE(text, 0)
        scanned = end == len(text)
    except (ValueError, StopIteration, RecursionError):
        scanned = False
    if not scanned:
        document = _decode(raw)
    try:
        event_id = document["id"]
        event_type = document["type"]
        created_text = document["created_at"]
        data = document["data"]
    except (KeyError, TypeError):  # a field missing, or not an object
        event_id = None
    if not (
        # The usual event, in the fewest steps; anything else is checked field by field.
        type(document) is dict
        and type(event_id) is str
        and event_id == webhook_id
        and type(event_type) is str
        and event_type
        and type(created_text) is str
        and created_text
    ):
        event_type, created_text, data = _envelope(document, webhook_id)
    try:
        # svc.wire's rule for a timestamp string, called directly: it is a str here.
        created_at = datetime.fromisoformat(created_text)
    except ValueError as exc:
        _fail(f"event {event_type!r} could not be read: {exc}")
    event = object.__new__(_VerifiedEvent)
    _SET_ID(event, webhook_id)
    _SET_TYPE(event, event_type)
    _SET_CREATED_AT(event, created_at)
    data_cls = EVENT_DATA_TYPES.get(event_type)
    if data_cls is None:
        _SET_DATA(event, data)  # a type this SDK does not know: the JSON
    else:
        _SET_PENDING(event, (data, data_cls))
    return event


def _envelope(document: Any, webhook_id: str) -> tuple[str, str, Any]:
    """``type``, ``created_at`` and ``data`` of an event, its envelope checked in order:
    the first thing wrong is the error."""
    if type(document) is not dict:
        _fail("body is not a JSON object")
    for field in _ENVELOPE_TEXT:
        value = document.get(field)
        if type(value) is not str or not value:  # JSON gives exact str
            _fail(f"body is not an event: {field!r} must be a non-empty string")
    if "data" not in document:
        _fail("body is not an event: 'data' is missing")
    if document["id"] != webhook_id:
        _fail(f"{WEBHOOK_ID_HEADER} does not match the event id in the body")
    return document["type"], document["created_at"], document["data"]


class _VerifiedEvent(Event):
    """An :class:`svc.Event` whose ``data`` is typed on first read.

    Typing the data (cattrs, decimals, metadata) costs more than the signature check and
    the JSON parse together, and a receiver that dedupes on ``id`` or ignores a ``type``
    never needs it.  The ``data`` slot stays empty until then, so ``__getattr__`` runs only
    for that first read; later reads are a plain slot.  Compares, hashes and prints as the
    :class:`svc.Event` it stands for.
    """

    __slots__ = ("_pending",)

    def __getattr__(self, name: str) -> Any:
        if name != "data":
            raise AttributeError(name)
        data = _read_data(self.type, *self._pending)
        object.__setattr__(self, "data", data)
        return data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.id, self.type, self.created_at, self.data) == (
            other.id,
            other.type,
            other.created_at,
            other.data,
        )

    __hash__ = Event.__hash__

    def __repr__(self) -> str:
        return repr(_rebuild_event(self.id, self.type, self.created_at, self.data))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_event, (self.id, self.type, self.created_at, self.data))


# The frozen event's slots are filled through their descriptors, as attrs' own __init__
# does through object.__setattr__ (about half the time of that).
_SET_ID, _SET_TYPE, _SET_CREATED_AT, _SET_DATA = (
    vars(Event)[name].__set__ for name in ("id", "type", "created_at", "data")
)
_SET_PENDING = vars(_VerifiedEvent)["_pending"].__set__


def _rebuild_event(id: str, type: str, created_at: datetime, data: Any) -> Event:
    return Event(id=id, type=type, created_at=created_at, data=data)


def _read_data(event_type: str, wire: Any, data_cls: type[Any]) -> Any:
    try:
        return structure(wire, data_cls)
    except RecursionError:
        _fail("event data is nested too deeply")
    except BaseValidationError as exc:
        detail = "; ".join(transform_error(exc, path="$.data"))
        _fail(f"event {event_type!r} could not be read: {detail}")
    # Broad on purpose, and only here: the converter runs cattrs-generated code and our
    # hooks (money, datetime, metadata), which report a bad field as ValueError, TypeError,
    # KeyError, OverflowError... depending on where it fails.  The signature is already
    # verified, so this is the sender's bug, but it must still surface as this module's one
    # error type rather than as a 500 in the receiver.
    except Exception as exc:
        _fail(f"event {event_type!r} could not be read: {exc}")

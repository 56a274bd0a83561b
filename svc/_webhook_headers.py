"""Read the three signature headers of a webhook delivery from whatever mapping a
framework hands the receiver.

:func:`read` is the rule: names match case-insensitively, a header present twice (in two
cases, or twice in a multi-value mapping) is refused, values must be non-empty strings.
It walks ``items()`` in Python, which is most of what verifying a small delivery costs
beyond the HMAC and the JSON, so the shapes receivers usually pass get a shortcut first:

* :func:`from_dict` -- a plain ``dict`` (any case of the names);
* :func:`from_raw` -- Starlette's ``Headers`` (FastAPI's request headers) and httpx's
  ``Headers``, read through their public ``raw`` byte pairs.

A shortcut returns the three values only when every check is known to pass -- each name
present exactly once, each value a non-empty string equal to what ``items()`` yields -- and
``None`` otherwise, so :func:`read` then decides and words the error exactly as it always
does.  Non-ASCII names go to :func:`read` too, where ``str.lower`` has the last word.
"""

from __future__ import annotations

import sys
from operator import itemgetter
from typing import Any, NoReturn

from ._errors import WebhookVerificationError

WEBHOOK_ID_HEADER = "X-Svc-Webhook-Id"
TIMESTAMP_HEADER = "X-Svc-Timestamp"
SIGNATURE_HEADER = "X-Svc-Signature"

_ID_LOWER = WEBHOOK_ID_HEADER.lower()
_TIMESTAMP_LOWER = TIMESTAMP_HEADER.lower()
_SIGNATURE_LOWER = SIGNATURE_HEADER.lower()
_WANTED = {name.lower(): name for name in (WEBHOOK_ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)}


Found = tuple[str, str, str]


def _fail(message: str) -> NoReturn:
    raise WebhookVerificationError(message)


# --- the rule -----------------------------------------------------------------------------


def read(headers: object) -> Found:
    """``(webhook id, timestamp text, signature text)`` from any mapping's ``items()``."""
    items = getattr(headers, "items", None)
    if not callable(items):
        _fail(f"headers must be a mapping of request headers, not {type(headers).__name__}")
    found: dict[str, str] = {}
    # One pass over items() rather than .get(): a plain dict is case-sensitive, and items()
    # also shows a header sent twice (Starlette keeps repeats as separate items).
    for name, value in items():
        try:
            canonical = _WANTED.get(str.lower(name))
        except TypeError:  # a name that is not text is no header of ours
            continue
        if canonical is None:
            continue
        if canonical in found:
            _fail(f"header {canonical} appears more than once")
        if not isinstance(value, str):
            _fail(f"header {canonical} must be a string, not {type(value).__name__}")
        found[canonical] = value
    if len(found) == 3 and all(found.values()):
        return found[WEBHOOK_ID_HEADER], found[TIMESTAMP_HEADER], found[SIGNATURE_HEADER]
    _fail_missing(found)


def _fail_missing(found: dict[str, str]) -> NoReturn:
    for canonical in _WANTED.values():  # the first missing or empty one, in this order
        if canonical not in found:
            _fail(f"missing header {canonical}")
        if not found[canonical]:
            _fail(f"header {canonical} is empty")
    raise AssertionError("unreachable: called with three non-empty headers")


# --- shortcuts ----------------------------------------------------------------------------

# Where the three headers are in a mapping whose names are these, in this order: which
# names (a dict) or which indices (raw pairs) to read, or None when read() must decide (a
# name missing or repeated, a name not ASCII).  A receiver sees the same few sets of names
# from one sender again and again, so the names are scanned once per set, not per call.
# Bounded: a sender varying its names only costs the scan each time, as read() does.
_DICT_SHAPES: dict[tuple[Any, ...], tuple[str, str, str] | None] = {}
_RAW_SHAPES: dict[tuple[Any, ...], tuple[int, int, int] | None] = {}
_SHAPES_MAX = 64
_UNSEEN = (-1, -1, -1)  # not a shape: names not scanned yet


def from_dict(headers: dict[Any, Any]) -> Found | None:
    """The three values of a plain ``dict`` in which each name is there once, in any case;
    ``None`` for anything else."""
    names = tuple(headers)
    try:
        where = _DICT_SHAPES[names]
    except KeyError:
        where = _DICT_SHAPES[names] = _dict_shape(names)
    if where is None:
        return None
    webhook_id = headers[where[0]]
    timestamp = headers[where[1]]
    signature = headers[where[2]]
    if (
        type(webhook_id) is str
        and webhook_id
        and type(timestamp) is str
        and timestamp
        and type(signature) is str
        and signature
    ):
        return webhook_id, timestamp, signature
    return None  # read() words what is wrong with a value


def _dict_shape(names: tuple[Any, ...]) -> tuple[str, str, str] | None:
    if len(_DICT_SHAPES) >= _SHAPES_MAX:
        _DICT_SHAPES.clear()
    indices = _positions([name if type(name) is str else None for name in names])
    if indices is None:
        return None
    return names[indices[0]], names[indices[1]], names[indices[2]]


def _positions(names: list[str | None]) -> tuple[int, int, int] | None:
    """Where each wanted name is, when each is there exactly once and every name is ASCII
    text (``None`` stands for a name that is not text: no header of ours)."""
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name is None:
            continue
        if not name.isascii():
            return None
        lowered = name.lower()
        if lowered in _WANTED:
            if lowered in seen:
                return None
            seen[lowered] = index
    if len(seen) != 3:
        return None
    return seen[_ID_LOWER], seen[_TIMESTAMP_LOWER], seen[_SIGNATURE_LOWER]


_NAME = itemgetter(0)

# Header classes whose ``raw`` is the list of (name, value) byte pairs that their
# ``items()`` decodes (Starlette: Latin-1, each pair an item; httpx: ASCII, UTF-8 or
# Latin-1 for all of them, repeats joined with ", ").  ASCII decodes alike in all three,
# which the shortcut requires of the names and the three values.  Looked up by identity
# in modules already imported: the SDK depends on neither.
_RAW_HEADER_CLASSES = (("starlette.datastructures", "Headers"), ("httpx", "Headers"))
_HAS_RAW: dict[type, bool] = {}


def _has_raw(cls: type) -> bool:
    known = _HAS_RAW.get(cls)
    if known is None:
        known = any(
            getattr(sys.modules.get(module), name, None) is cls
            for module, name in _RAW_HEADER_CLASSES
        )
        if len(_HAS_RAW) >= _SHAPES_MAX:
            _HAS_RAW.clear()
        _HAS_RAW[cls] = known
    return known


def from_raw(headers: object) -> Found | None:
    """The three values of Starlette's or httpx's ``Headers`` in which each name is there
    once, in any case, with ASCII values; ``None`` for anything else (other mappings too)."""
    if not _has_raw(type(headers)):
        return None
    pairs = headers.raw  # type: ignore[attr-defined]
    try:
        names = tuple(map(_NAME, pairs))
        where = _RAW_SHAPES.get(names, _UNSEEN)
    except (TypeError, IndexError, KeyError):  # not pairs: items() decides what that is
        return None
    if where is _UNSEEN:
        where = _RAW_SHAPES[names] = _raw_shape(names)
    if where is None:
        return None
    webhook_id = _ascii_value(pairs[where[0]])
    timestamp = _ascii_value(pairs[where[1]])
    signature = _ascii_value(pairs[where[2]])
    if webhook_id and timestamp and signature:
        return webhook_id, timestamp, signature
    return None


def _raw_shape(names: tuple[Any, ...]) -> tuple[int, int, int] | None:
    if len(_RAW_SHAPES) >= _SHAPES_MAX:
        _RAW_SHAPES.clear()
    if not all(type(name) is bytes for name in names):
        return None
    return _positions([name.decode("latin-1") for name in names])


def _ascii_value(pair: Any) -> str | None:
    value = pair[1]
    if type(value) is bytes and value.isascii():
        return value.decode("ascii")
    return None

"""``svc.wire``: models to and from the JSON the API writes, with the one cattrs
converter that reads and writes every model.  Public: the reference server builds its
answers with it, so what the server sends is what the SDK reads.

Wire rules it enforces:

* money is a decimal string on the wire and a :class:`~decimal.Decimal` in Python;
* timestamps are ISO 8601 strings;
* ``ResourceMetadata`` is flat on the wire (seller-defined keys sit beside ``sku_kind``);
* ``Event.data`` is typed by ``Event.type`` where the SDK knows the type;
* keys the SDK does not know are ignored, so a newer server never breaks an older client;
* a model's ``request_id`` is its answer's envelope (``{"ok": true, ..., "request_id"}``),
  so an unset one is left out rather than written as ``null``: a list's items and a
  resource inside an event carry none.  Only that model field: a ``request_id`` key in a
  seller's metadata is data and is written as given, as is an event's ``data.request_id``
  (the paying request, a field of the event).
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from ._models import EVENT_DATA_TYPES, Event, ResourceMetadata
from .money import format_amount, parse_amount

__all__ = ["converter", "nesting_depth", "structure", "unstructure"]

T = TypeVar("T")

converter = cattrs.Converter(omit_if_default=False, forbid_extra_keys=False)


def _structure_decimal(value: Any, _: type) -> Decimal:
    return parse_amount(value if not isinstance(value, float) else repr(value))


def _structure_datetime(value: Any, _: type) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, int | float):
        from datetime import UTC

        return datetime.fromtimestamp(value, tz=UTC)
    return datetime.fromisoformat(str(value))


def _unstructure_datetime(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


_METADATA_FIELDS = ("sku_kind", "credits", "credit_unit")
_PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _structure_credits(value: Any) -> Decimal:
    """Credits are a count the seller chose (a JSON number), not money: the amount grammar
    does not apply, only that it is a finite, non-negative plain number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise TypeError(f"credits must be a number, not {type(value).__name__}")
    if isinstance(value, str) and not _PLAIN_NUMBER.fullmatch(value):
        raise ValueError(f"credits must be a plain number, got {value[:40]!r}")
    credits = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not credits.is_finite() or credits.is_signed():
        raise ValueError(f"credits must be a finite, non-negative number, got {value!r}")
    return credits


def _structure_metadata(value: Any, _: type) -> ResourceMetadata:
    if value is None:
        return ResourceMetadata()
    if not isinstance(value, dict):
        raise TypeError("metadata must be an object")
    extra = {k: v for k, v in value.items() if k not in _METADATA_FIELDS}
    credits = value.get("credits")
    return ResourceMetadata(
        sku_kind=str(value.get("sku_kind") or "one_shot"),
        credits=None if credits is None else _structure_credits(credits),
        credit_unit=value.get("credit_unit"),
        extra=extra,
    )


def _unstructure_metadata(value: ResourceMetadata) -> dict[str, Any]:
    out: dict[str, Any] = dict(value.extra)
    out["sku_kind"] = value.sku_kind
    out["credits"] = None if value.credits is None else _credits_number(value.credits)
    out["credit_unit"] = value.credit_unit
    return out


def _credits_number(credits: Decimal) -> int | float | str:
    """Credits are a count (``100``); keep whole counts as JSON integers."""
    if credits == credits.to_integral_value():
        return int(credits)
    return format(credits, "f")


def _structure_event(value: Any, _: type) -> Event:
    if not isinstance(value, dict):
        raise TypeError("event must be an object")
    event_type = str(value["type"])
    data_cls = EVENT_DATA_TYPES.get(event_type)
    raw = value.get("data")
    data: Any = converter.structure(raw, data_cls) if data_cls is not None else raw
    return Event(
        id=str(value["id"]),
        type=event_type,
        created_at=_structure_datetime(value["created_at"], datetime),
        data=data,
    )


def _unstructure_event(value: Event) -> dict[str, Any]:
    data = value.data
    if attrs.has(type(data)):
        data = converter.unstructure(data)
    return {
        "id": value.id,
        "type": value.type,
        "created_at": _unstructure_datetime(value.created_at),
        "data": data,
    }


_EVENT_DATA_CLASSES = frozenset(EVENT_DATA_TYPES.values())


def _answers_with_request_id(cls: Any) -> bool:
    """A model whose ``request_id`` is its answer's (an event's data has its own)."""
    return (
        isinstance(cls, type)
        and attrs.has(cls)
        and cls not in _EVENT_DATA_CLASSES
        and "request_id" in attrs.fields_dict(cls)
    )


def _unstructure_without_unset_request_id(cls: Any) -> Any:
    return make_dict_unstructure_fn(cls, converter, request_id=override(omit_if_default=True))


converter.register_unstructure_hook_factory(
    _answers_with_request_id, _unstructure_without_unset_request_id
)
converter.register_structure_hook(Decimal, _structure_decimal)
converter.register_unstructure_hook(Decimal, format_amount)
converter.register_structure_hook(datetime, _structure_datetime)
converter.register_unstructure_hook(datetime, _unstructure_datetime)
converter.register_structure_hook(ResourceMetadata, _structure_metadata)
converter.register_unstructure_hook(ResourceMetadata, _unstructure_metadata)
converter.register_structure_hook(Event, _structure_event)
converter.register_unstructure_hook(Event, _unstructure_event)


def structure(data: Any, cls: type[T]) -> T:
    """Build a model from decoded JSON."""
    return converter.structure(data, cls)


def unstructure(value: Any) -> Any:
    """Turn a model into JSON-ready data (decimal strings, ISO timestamps)."""
    return converter.unstructure(value)


def nesting_depth(raw: bytes, *, above: int) -> int:
    """How deep ``[``/``{`` nest outside strings in the JSON text ``raw``, found without
    parsing; 0 when it cannot exceed ``above`` (fewer openers than that, found in C).

    Check it before ``json.loads`` on untrusted bytes: the parser recurses, and where a
    library has raised the process's recursion limit (py_ecc, under eth-account, sets
    100 000) a deep enough body overflows the C stack and kills the process instead of
    raising ``RecursionError``."""
    if raw.count(b"[") + raw.count(b"{") <= above:
        return 0
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest

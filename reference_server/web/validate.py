"""Reading request bodies into their typed shapes, collecting every problem into one 422.

The pipeline reads every body by the shape its endpoint declares (``Endpoint.body``, a
class of :mod:`svc.bodies`): :func:`read_body` walks the class's fields and the markers
beside their types (:mod:`svc.schema`), the same definition the OpenAPI document and the
SDK are made from, so the three cannot disagree.  A handler's own cross-field rules go
through :meth:`Fields.rules` the same way.  A body is refused whole if anything is wrong,
so nothing is half-applied.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Collection
from decimal import Decimal
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import attrs
from eth_utils.address import is_checksum_address

from svc import bodies, schema
from svc.money import GRAMMAR_HINT, AmountError, parse_amount

from ..domain.ledger import MAX_AMOUNT
from ..invariant import InvariantError
from .errors import invalid

__all__ = [
    "EVM_ADDRESS",
    "FOREIGN_JSON",
    "MAX_AMOUNT",
    "RAW_BODY",
    "Fields",
    "Unread",
    "checked",
    "checksum_ok",
    "read_body",
]

#: An EVM address (hex; its EIP-55 checksum is a route's rule), the pattern svc.bodies declares.
EVM_ADDRESS = re.compile(bodies.EVM_ADDRESS)
_MISSING = object()


@attrs.frozen
class Unread:
    """A body the pipeline does not read by a declared shape (:data:`RAW_BODY`,
    :data:`FOREIGN_JSON`)."""

    name: str


#: The body is not read as JSON: the handler reads ``call.request`` itself (to stream it,
#: forward it, or read a form).
RAW_BODY = Unread("raw")
#: The body is another protocol's JSON object (the x402 facilitator's), handed to the
#: handler as sent.
FOREIGN_JSON = Unread("foreign JSON")
T = TypeVar("T")
V = TypeVar("V")


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str, separators=(",", ":")).encode())


def read_body(cls: type[T], body: dict[str, Any], *, production: bool) -> T:
    """``body`` as an instance of ``cls``, or a 422 naming every bad, missing or unknown
    field.  ``production`` decides where a URL must be https."""
    f = Fields(body)
    value = f.read(cls, production=production)
    f.done()
    return value


class Fields:
    def __init__(
        self, body: dict[str, Any], *, prefix: str = "", errors: list[dict[str, str]] | None = None
    ) -> None:
        self._body = body
        self._prefix = prefix
        self._seen: set[str] = set()
        self.errors: list[dict[str, str]] = [] if errors is None else errors

    @classmethod
    def rules(cls, body: dict[str, Any]) -> Fields:
        """For a handler's cross-field rules over a body the pipeline has already read by
        its shape: every field is known, :meth:`error` and :meth:`done` as usual."""
        fields = cls(body)
        fields._seen.update(body)
        return fields

    def nested(self, name: str) -> Fields | None:
        """Fields of an object-valued field, reporting into the same error list."""
        value = self.object(name)
        if value is None:
            return None
        return Fields(value, prefix=f"{self._prefix}{name}.", errors=self.errors)

    def present(self, name: str) -> bool:
        return name in self._body

    def is_null(self, name: str) -> bool:
        """Sent explicitly as JSON null (to clear a setting), as opposed to left out."""
        self._seen.add(name)
        return name in self._body and self._body[name] is None

    def error(self, name: str, message: str) -> None:
        self.errors.append({"field": self._prefix + name, "message": message})

    def _get(self, name: str, required: bool) -> Any:
        self._seen.add(name)
        value = self._body.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                self.error(name, "is required")
            return _MISSING
        return value

    def string(
        self,
        name: str,
        *,
        required: bool = False,
        max_length: int = 1000,
        pattern: re.Pattern[str] | None = None,
        pattern_hint: str = "",
        choices: tuple[str, ...] | None = None,
    ) -> str | None:
        value = self._get(name, required)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            self.error(name, "must be a string")
            return None
        if required and not value.strip():
            self.error(name, "must not be empty")
            return None
        if len(value) > max_length:
            self.error(name, f"must be at most {max_length} characters")
            return None
        if choices is not None and value not in choices:
            self.error(name, f"must be one of {', '.join(choices)}")
            return None
        if pattern is not None and not pattern.fullmatch(value):
            self.error(name, f"must be {pattern_hint or 'well formed'}")
            return None
        return value

    def _typed(self, name: str, required: bool, kind: type[V], message: str) -> V | None:
        """The value if it is a ``kind`` (a JSON ``true`` is no whole number), else ``message``."""
        value = self._get(name, required)
        if value is _MISSING:
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            self.error(name, message)
            return None
        return value

    def boolean(self, name: str) -> bool | None:
        return self._typed(name, False, bool, "must be true or false")

    def amount(self, name: str, *, required: bool = False) -> Decimal | None:
        value = self._get(name, required)
        if value is _MISSING:
            return None
        if not isinstance(value, str):
            self.error(name, f"must be {GRAMMAR_HINT}, sent as a JSON string")
            return None
        try:
            amount = parse_amount(value)  # the one grammar, shared with the SDK
        except AmountError as exc:
            self.error(name, exc.reason)
            return None
        if amount <= 0:
            self.error(name, "must be greater than 0")
            return None
        if amount > MAX_AMOUNT:
            self.error(name, f"must be at most {MAX_AMOUNT}")
            return None
        return amount

    def url(
        self, name: str, *, https_only: bool, required: bool = False, max_length: int = 2048
    ) -> str | None:
        """An absolute http(s) URL that a URL parser reads one way: host present, port
        in range, brackets balanced, no spaces."""
        value = self.string(name, max_length=max_length, required=required)
        if value is None:
            return None
        allowed = ("https",) if https_only else ("https", "http")
        try:
            parts = urlsplit(value)
            well_formed = parts.scheme in allowed and bool(parts.hostname)
            parts.port  # noqa: B018 -- raises ValueError for a port out of range
        except ValueError:
            well_formed = False
        if not well_formed or any(c.isspace() for c in value):
            self.error(name, "must be an absolute " + " or ".join(allowed) + " URL")
            return None
        return value

    def string_list(
        self,
        name: str,
        *,
        max_items: int,
        pattern_hint: str,
        pattern: re.Pattern[str] | None = None,
        choices: Collection[str] | None = None,
    ) -> list[str] | None:
        """A list of strings, each matching ``pattern`` or one of ``choices``; repeats
        are dropped, order kept."""
        value = self._get(name, False)
        if value is _MISSING:
            return None
        if not isinstance(value, list) or len(value) > max_items:
            self.error(name, f"must be a list of at most {max_items} strings")
            return None

        def ok(item: object) -> bool:
            if not isinstance(item, str):
                return False
            if choices is not None:
                return item in choices
            return pattern is not None and pattern.fullmatch(item) is not None

        bad = [v for v in value if not ok(v)]
        if bad:
            self.error(name, f"items must be {pattern_hint}")
            return None
        return list(dict.fromkeys(value))

    def object(self, name: str, *, required: bool = False) -> dict[str, Any] | None:
        return self._typed(name, required, dict, "must be an object")

    def read(self, cls: type[T], *, production: bool) -> T:
        """Every field of ``cls`` read by its type and marker (see :mod:`svc.schema`);
        problems are collected, and a field with one reads as ``None``.  Call
        :meth:`done` to refuse unknown fields and raise."""
        values: dict[str, Any] = {}
        if getattr(cls, "NAMES_A_CHANGE", False) and not self._body:
            names = ", ".join(shape.name for shape in schema.fields_of(cls))
            self.error("body", f"names no field to change (one of {names})")
        for shape in schema.fields_of(cls):
            values[shape.name] = self._read_field(shape, production)
        if not self.errors:
            try:
                return cls(**values)
            except bodies.BodyRuleError as refused:  # a rule across the class's fields
                for error in refused.errors:
                    self.error(error["field"], error["message"])
        # Some field is bad: the instance is never used, but must still be built.
        return cls.__new__(cls)

    def _read_field(self, shape: schema.FieldShape, production: bool) -> Any:
        name, tp, required = shape.name, shape.type, shape.required
        if tp is Any:  # any JSON value, taken as sent (pay-url's ``json``)
            value = self._get(name, required)
            return None if value is _MISSING else value
        if attrs.has(tp):
            nested = self.nested(name)
            if nested is None:
                if required and not self.present(name):
                    self.error(name, "is required")
                return None
            value = nested.read(tp, production=production)
            nested.done()  # a nested reader only records its unknown fields
            return value
        if tp is Decimal:
            return self.amount(name, required=required)
        if tp is bool:
            return self.boolean(name)
        if tp is int:
            return self.integer(name, required=required)
        if typing.get_origin(tp) is Literal:
            return self.string(name, required=required, choices=typing.get_args(tp))
        return self._read_marked(shape, production)

    def _read_marked(self, shape: schema.FieldShape, production: bool) -> Any:
        """A string, URL, list or object field, as its marker says."""
        name, tp, marker, required = shape.name, shape.type, shape.marker, shape.required
        if isinstance(marker, schema.Url):
            https_only = marker.https == "always" or (marker.https == "production" and production)
            return self.url(
                name, https_only=https_only, required=required, max_length=marker.max_length
            )
        if isinstance(marker, schema.Items):
            pattern = re.compile(marker.pattern) if marker.pattern else None
            return self.string_list(
                name,
                max_items=marker.max_items,
                pattern=pattern,
                choices=marker.choices,
                pattern_hint=marker.hint,
            )
        if isinstance(marker, schema.JsonObject) or typing.get_origin(tp) is dict:
            value = self.object(name, required=required)
            limit = marker.max_bytes if isinstance(marker, schema.JsonObject) else None
            if value is not None and limit is not None and _json_size(value) > limit:
                self.error(name, f"must be at most {limit} bytes of JSON")
                return None
            return value
        if tp is str:
            text = marker if isinstance(marker, schema.Text) else schema.Text()
            return self.string(
                name,
                required=required,
                max_length=text.max_length,
                pattern=re.compile(text.pattern) if text.pattern else None,
                pattern_hint=text.hint,
            )
        raise InvariantError(f"{name}: no reader for {tp!r}")

    def integer(self, name: str, *, required: bool = False) -> int | None:
        return self._typed(name, required, int, "must be a whole number")

    def done(self) -> None:
        """Refuse unknown fields (a typo must not be silently ignored) and report all."""
        for name in self._body:
            if name not in self._seen:
                self.error(name, "is not a known field")
        if self.errors and not self._prefix:
            raise invalid(self.errors)


def checksum_ok(address: str) -> bool:
    """All-lower or all-upper hex carries no checksum; mixed case must match EIP-55."""
    body = address[2:]
    return body in (body.lower(), body.upper()) or bool(is_checksum_address(address))


def checked(value: T | None) -> T:
    """A value that :meth:`Fields.done` has already required: narrows ``T | None`` to
    ``T`` for the type checker with a real check (an ``assert`` vanishes under ``-O``)."""
    if value is None:
        raise InvariantError("a required field passed validation without a value")
    return value

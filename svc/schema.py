"""``svc.schema``: the API's shapes as typed classes, and their JSON Schema.

Every request body (:mod:`svc.bodies`) and every answer (the models exported from
:mod:`svc`) is one attrs class.  Constraints a type cannot say -- a length, a pattern, a
list of allowed words -- are written beside the type with :data:`typing.Annotated`::

    name: Annotated[str | None, Text(max_length=200)] = None

From that one definition come the reference server's validation (which reads these
markers), the SDK's models, and the OpenAPI document (:func:`json_schema`).  A field
without a default is required; ``X | None`` accepts ``null``, read as "left out" unless the
route documents ``null`` as "clear this".

Why our own small generator rather than a library's: the wire rules live in
:mod:`svc.wire` (money as decimal strings, flat resource metadata, typed event data), and
the schema must say exactly those, from the same types, with no second model layer.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, Union

import attrs

from ._models import Event, ResourceMetadata
from .money import AMOUNT_PATTERN, MAX_AMOUNT

__all__ = [
    "FieldShape",
    "Items",
    "JsonObject",
    "Text",
    "Url",
    "example_of",
    "fields_of",
    "json_schema",
]


# --- markers ------------------------------------------------------------------------------


@attrs.frozen
class Text:
    """A string: at most ``max_length`` characters, matching ``pattern`` when given
    (``hint`` says in words what the pattern wants, for error messages)."""

    max_length: int = 1000
    pattern: str | None = None
    hint: str = ""


@attrs.frozen
class Url:
    """An absolute http(s) URL of at most 2048 characters.  ``https``: ``"always"``,
    ``"production"`` (http allowed outside production) or ``"route"`` (the route checks
    the scheme itself, with rules of its own)."""

    https: Literal["always", "production", "route"] = "production"
    max_length: int = 2048


@attrs.frozen
class Items:
    """A list of at most ``max_items`` strings, each one of ``choices`` or matching
    ``pattern``; repeats are dropped, order kept."""

    max_items: int
    hint: str
    pattern: str | None = None
    choices: tuple[str, ...] | None = None


@attrs.frozen
class JsonObject:
    """A JSON object of the seller's own keys, at most ``max_bytes`` as JSON."""

    max_bytes: int = 4096
    #: Left out of equality and hashing: a marker in ``Annotated`` must hash (cattrs
    #: looks its type up), and a dict does not.
    properties: Mapping[str, Any] = attrs.field(factory=dict, eq=False)


Marker = Text | Url | Items | JsonObject
_MARKERS = (Text, Url, Items, JsonObject)


# --- reading annotations ------------------------------------------------------------------


@attrs.frozen
class FieldShape:
    """One field of a shape, its annotation taken apart once for every reader."""

    name: str
    #: The type with ``None`` and ``Annotated`` removed.
    type: Any
    marker: Marker | None
    required: bool
    nullable: bool
    doc: str | None = None


def _split(annotation: Any) -> tuple[Any, Marker | None, bool]:
    """``Annotated[T | None, marker]`` (or ``Annotated[T, marker] | None``) as its parts."""
    marker: Marker | None = None
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        marker = next((e for e in extras if isinstance(e, _MARKERS)), None)
    nullable = False
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        annotation = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
        if typing.get_origin(annotation) is typing.Annotated:
            inner, inner_marker, _ = _split(annotation)
            return inner, inner_marker or marker, nullable
    return annotation, marker, nullable


_SHAPES: dict[type, tuple[FieldShape, ...]] = {}


def fields_of(cls: type) -> tuple[FieldShape, ...]:
    """The fields of an attrs class, in order, with their markers (cached per class)."""
    shapes = _SHAPES.get(cls)
    if shapes is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        out = []
        for field in attrs.fields(cls):
            base, marker, nullable = _split(hints[field.name])
            out.append(
                FieldShape(
                    name=field.alias or field.name,
                    type=base,
                    marker=marker,
                    required=field.default is attrs.NOTHING,
                    nullable=nullable,
                    doc=field.metadata.get("doc"),
                )
            )
        shapes = _SHAPES[cls] = tuple(out)
    return shapes


def example_of(cls: type) -> dict[str, Any] | None:
    """A class's ``EXAMPLE`` (a wire-form dict), when it has one."""
    example = getattr(cls, "EXAMPLE", None)
    return dict(example) if isinstance(example, Mapping) else None


# --- JSON Schema --------------------------------------------------------------------------

#: Types whose wire form is not what their attributes say (see :mod:`svc.wire`).
WIRE_FORMS: dict[type, dict[str, Any]] = {
    ResourceMetadata: {
        "type": "object",
        "description": "What a payment buys; the seller's own keys sit beside these.",
        "properties": {
            "sku_kind": {"type": "string", "enum": ["one_shot", "credit_topup"]},
            "credits": {"type": ["number", "string", "null"]},
            "credit_unit": {"type": ["string", "null"], "maxLength": 64},
        },
    },
    Event: {
        "type": "object",
        "required": ["id", "type", "created_at", "data"],
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "data": {"type": "object"},
        },
    },
}


def json_schema(
    tp: Any, components: dict[str, Any], *, request: bool = False, ref_prefix: str = ""
) -> dict[str, Any]:
    """The JSON Schema (2020-12, as OpenAPI 3.1 takes it) of ``tp``.  attrs classes go to
    ``components`` by name and are referenced; ``request``: unknown keys are refused (the
    server refuses them), otherwise allowed (a newer server may add fields)."""
    prefix = ref_prefix or "#/components/schemas/"
    return _schema(tp, None, components, request, prefix)


def _schema(
    tp: Any, marker: Marker | None, components: dict[str, Any], request: bool, prefix: str
) -> dict[str, Any]:
    if isinstance(tp, type) and tp in WIRE_FORMS:
        return dict(WIRE_FORMS[tp])
    if isinstance(tp, type) and attrs.has(tp):
        _component(tp, components, request, prefix)
        return {"$ref": prefix + tp.__name__}
    origin = typing.get_origin(tp)
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        return {
            "anyOf": [_schema(a, None, components, request, prefix) for a in typing.get_args(tp)]
        }
    if origin is list or tp is list:
        (item,) = typing.get_args(tp) or (Any,)
        return _array(item, marker, components, request, prefix)
    if origin is dict or tp is dict:
        out: dict[str, Any] = {"type": "object"}
        if isinstance(marker, JsonObject) and marker.properties:
            out["properties"] = dict(marker.properties)
        return out
    return _scalar(tp, marker)


def _array(
    item: Any, marker: Marker | None, components: dict[str, Any], request: bool, prefix: str
) -> dict[str, Any]:
    if not isinstance(marker, Items):
        return {"type": "array", "items": _schema(item, None, components, request, prefix)}
    items: dict[str, Any] = {"type": "string"}
    if marker.choices is not None:
        items["enum"] = list(marker.choices)
    elif marker.pattern is not None:
        items["pattern"] = marker.pattern
    return {"type": "array", "items": items, "maxItems": marker.max_items}


def _scalar(tp: Any, marker: Marker | None) -> dict[str, Any]:
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is Decimal:
        return {
            "type": "string",
            "pattern": f"^{AMOUNT_PATTERN}$",
            "description": "Dollars as a decimal string, at most 6 decimal places; "
            f"in a request, above 0 and at most {MAX_AMOUNT}.",
            "examples": ["0.05"],
        }
    if tp is datetime:
        return {"type": "string", "format": "date-time"}
    if tp is str:
        out: dict[str, Any] = {"type": "string"}
        if isinstance(marker, Text):
            out["maxLength"] = marker.max_length
            if marker.pattern is not None:
                out["pattern"] = marker.pattern
        elif isinstance(marker, Url):
            out.update(maxLength=marker.max_length, format="uri")
        return out
    return {}


def _component(cls: type, components: dict[str, Any], request: bool, prefix: str) -> None:
    name = cls.__name__
    if name in components:
        return
    components[name] = {}  # reserved first: a class may refer to itself
    shapes = fields_of(cls)
    properties = {shape.name: _property(shape, components, request, prefix) for shape in shapes}
    required = [shape.name for shape in shapes if shape.required]
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    if request:
        out["additionalProperties"] = False
        if getattr(cls, "NAMES_A_CHANGE", False):
            out["minProperties"] = 1
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(f"{name}("):
        out["description"] = " ".join(doc.split("\n\n")[0].split())
    example = example_of(cls)
    if example is not None:
        out["examples"] = [example]
    components[name] = out


def _property(
    shape: FieldShape, components: dict[str, Any], request: bool, prefix: str
) -> dict[str, Any]:
    schema = _schema(shape.type, shape.marker, components, request, prefix)
    if request and shape.required and schema.get("type") == "string":
        schema.setdefault("minLength", 1)
    if shape.nullable:
        schema = _or_null(schema)
    if shape.doc:
        schema = {**schema, "description": shape.doc}
    return schema


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}

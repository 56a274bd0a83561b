"""The fields of a body class (:mod:`svc.bodies`) as the CLI's options and the MCP tools'
parameters: where a command or tool mirrors a route, its parameters are read from the
route's body here, so a field's name, type, choices and help are written once.  And what
else the CLI and the tools share: a resource's metadata given as three parameters, and
the answer of ``create-pay-link``."""

from __future__ import annotations

import typing
from decimal import Decimal
from typing import Any

import attrs

from .schema import FieldShape, Items, fields_of

#: What a field without a ``doc`` or a marker's hint is, by its type.
_TYPE_HELP = {Decimal: 'An amount as a decimal string, e.g. "1.00".', bool: "true or false."}


def params(cls: type, *names: str) -> list[FieldShape]:
    """The fields ``names`` of ``cls`` (all when none are named), in the order named; a
    field holding a nested body class (``CreateWalletKey.policy``) is its own fields."""
    out: list[FieldShape] = []
    for shape in fields_of(cls):
        if attrs.has(shape.type):
            out.extend(params(shape.type))
        else:
            out.append(shape)
    if not names:
        return out
    by_name = {shape.name: shape for shape in out}
    return [by_name[name] for name in names]


def choices(shape: FieldShape) -> tuple[str, ...] | None:
    """The values a field takes when they are a closed set (a ``Literal`` or ``Items``)."""
    if typing.get_origin(shape.type) is typing.Literal:
        return typing.get_args(shape.type)
    return shape.marker.choices if isinstance(shape.marker, Items) else None


def help_of(shape: FieldShape) -> str:
    """A field's help: its ``doc``, else its marker's hint, else what its type takes."""
    hint = getattr(shape.marker, "hint", "")
    if shape.doc or hint:
        return shape.doc or hint + "."
    fallback = shape.name.replace("_", " ").capitalize() + "."
    return _TYPE_HELP.get(shape.type, fallback)


def resource_metadata(
    sku_kind: str | None, credits: str | float | None, credit_unit: str | None
) -> dict[str, Any] | None:
    """A resource's ``metadata`` from the three options (parameters) that stand for it;
    ``None`` when none is given.  Whole ``credits`` are sent as an integer."""
    if sku_kind is None and credits is None and credit_unit is None:
        return None
    meta: dict[str, Any] = {"sku_kind": sku_kind or "one_shot"}
    if credits is not None:
        number = float(credits)
        meta["credits"] = int(number) if number.is_integer() else number
    if credit_unit is not None:
        meta["credit_unit"] = credit_unit
    return meta


def pay_link(resource: Any) -> dict[str, Any]:
    """What to share to get paid for ``resource``: its gate and its buy page."""
    return {
        "resource_id": resource.id,
        "gate_url": resource.gate_url,
        "pay_url": resource.pay_url,
        # The spec's tool table calls the same URL pay_page_url: both, always equal.
        "pay_page_url": resource.pay_url,
    }

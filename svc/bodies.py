"""``svc.bodies``: what each route takes, one attrs class per request body.

The reference server reads every body by these classes (unknown fields refused, every
problem listed in one 422), the OpenAPI document describes them, and the SDK builds the
bodies it sends from them (:func:`to_json`).  Markers beside the types say what a type
cannot (:mod:`svc.schema`).  A field without a default is required; an optional field
left out or sent as ``null`` means "not given", except where a route documents ``null`` as
"clear this".

``EXAMPLE`` on a class is the example the OpenAPI document shows.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal

import attrs

from .schema import JsonObject, Text, Url
from .wire import unstructure

#: A path a seller's gate sells: starts with ``/``, no spaces, query or fragment.
HTTP_PATH = r"^/[^\s?#]{0,2047}$"
#: An MCP tool name.
TOOL_NAME = r"^[A-Za-z0-9_.\-/]{1,128}$"

_METADATA = JsonObject(
    max_bytes=8 * 1024,
    properties={
        "sku_kind": {"type": "string", "enum": ["one_shot", "credit_topup"]},
        "credits": {"type": "number", "exclusiveMinimum": 0},
        "credit_unit": {"type": "string", "maxLength": 64},
    },
)


def to_json(body: Any) -> dict[str, Any]:
    """A body as the JSON object sent: fields not given (``None``) are left out."""
    return {k: v for k, v in unstructure(body).items() if v is not None}


# --- payouts -----------------------------------------------------------------------------

#: A country as ISO 3166-1 alpha-2.
COUNTRY = r"^[A-Za-z]{2}$"


@attrs.frozen(kw_only=True)
class ConnectOnboard:
    """Open the seller's payout account (first call) and get a fresh onboarding link for a
    human; ``type`` is the processor's account kind (``express`` by default)."""

    country: Annotated[
        str, Text(max_length=2, pattern=COUNTRY, hint="a two-letter country code, e.g. US")
    ]
    type: Literal["express", "standard"] | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"country": "US", "type": "express"}


@attrs.frozen(kw_only=True)
class UpdateConnect:
    """Auto payout for this seller: on or off, and the balance it waits for
    (``auto_payout_minimum: null`` = the server's default)."""

    auto_payout: bool | None = None
    auto_payout_minimum: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"auto_payout": True, "auto_payout_minimum": "50.00"}


@attrs.frozen(kw_only=True)
class Withdraw:
    """How much to withdraw; left out, the whole available balance."""

    amount: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "25.00"}


# --- resources ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreateResource:
    """A priced HTTP path (``kind: http`` with ``path``) or MCP tool (``kind: mcp`` with
    ``tool``)."""

    kind: Literal["http", "mcp"]
    amount: Decimal
    path: Annotated[
        str | None, Text(max_length=2048, pattern=HTTP_PATH, hint="a path starting with /")
    ] = None
    tool: Annotated[
        str | None, Text(max_length=128, pattern=TOOL_NAME, hint="an MCP tool name")
    ] = None
    description: Annotated[str | None, Text(max_length=1000)] = None
    metadata: Annotated[dict[str, Any] | None, _METADATA] = None
    upstream_url: Annotated[str | None, Url()] = None
    listed: bool | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "kind": "http",
        "path": "/v1/forecast",
        "amount": "0.05",
        "description": "A 7-day forecast",
    }


@attrs.frozen(kw_only=True)
class UpdateResource:
    """The fields to change; fields left out keep their values."""

    path: Annotated[
        str | None, Text(max_length=2048, pattern=HTTP_PATH, hint="a path starting with /")
    ] = None
    tool: Annotated[
        str | None, Text(max_length=128, pattern=TOOL_NAME, hint="an MCP tool name")
    ] = None
    amount: Decimal | None = None
    description: Annotated[str | None, Text(max_length=1000)] = None
    metadata: Annotated[dict[str, Any] | None, _METADATA] = None
    upstream_url: Annotated[str | None, Url()] = None
    listed: bool | None = None
    active: bool | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "0.10"}

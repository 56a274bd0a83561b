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


# --- owners and sellers -------------------------------------------------------------------

#: An email address, as sign-up takes it (stored lowercased).
EMAIL = r"^[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s]{2,63}$"
#: An EVM address: ``0x`` and 40 hex digits.  Mixed case is an EIP-55 checksum, which the
#: server checks too (a pattern cannot say it).
EVM_ADDRESS = r"^0x[0-9a-fA-F]{40}$"


@attrs.frozen(kw_only=True)
class CreateOwner:
    """Sign up: one owner per email address; the answer carries the owner's JWT."""

    email: Annotated[str, Text(max_length=320, pattern=EMAIL, hint="an email address")]

    EXAMPLE: ClassVar[dict[str, Any]] = {"email": "dev@example.com"}


@attrs.frozen(kw_only=True)
class CreateSeller:
    """A seller in the request's environment; ``name`` is a label of your own."""

    name: Annotated[str | None, Text(max_length=200)] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"name": "Weather API"}


@attrs.frozen(kw_only=True)
class EnablePayments:
    """Turn on MPP and x402 for every gate of the seller; optionally set the processor
    profile and the wallet payouts go to."""

    processor_profile_id: Annotated[str | None, Text(max_length=200)] = None
    payout_wallet_address: Annotated[
        str | None,
        Text(
            max_length=42,
            pattern=EVM_ADDRESS,
            hint="an EVM address (0x followed by 40 hex digits)",
        ),
    ] = attrs.field(
        default=None,
        metadata={
            "doc": "Where payouts go (mixed case must be a valid EIP-55 checksum); "
            "null clears it: payouts go back to the processor's deposit."
        },
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "payout_wallet_address": "0x52908400098527886E0F7030069857D2E4169EE7"
    }


@attrs.frozen(kw_only=True)
class RecycleBalance:
    """Move seller balance into the owner's account wallet: all of it, or ``amount``."""

    amount: Decimal | None = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"amount": "5.00"}


# --- handles ------------------------------------------------------------------------------

#: A handle as sent: 3 to 30 letters, digits, ``_`` or ``-`` starting with a letter or
#: digit, optionally after ``@``; case and surrounding spaces are ignored.
HANDLE = r"^\s*@?[A-Za-z0-9][A-Za-z0-9_-]{2,29}\s*$"


@attrs.frozen(kw_only=True)
class ClaimHandle:
    """Claim an ``@name`` in the request's environment; transfers to it land in the
    owner's account wallet."""

    handle: Annotated[
        str,
        Text(
            max_length=31,
            pattern=HANDLE,
            hint="3-30 lowercase letters, digits, _ or -, optionally after @",
        ),
    ]

    EXAMPLE: ClassVar[dict[str, Any]] = {"handle": "@weather-bot"}


# --- spend --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Pay:
    """Pay an in-service resource (``resource_id`` alone: its price is paid) or transfer
    to a handle (``destination`` and ``amount``); exactly one of the two."""

    resource_id: Annotated[str | None, Text(max_length=40)] = None
    destination: Annotated[str | None, Text(max_length=31)] = None
    amount: Decimal | None = attrs.field(
        default=None, metadata={"doc": "With destination only: a resource is paid its price."}
    )

    EXAMPLE: ClassVar[dict[str, Any]] = {"destination": "@weather-bot", "amount": "0.25"}


# --- access -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class VerifyReceipt:
    """A receipt to check, optionally for one resource (``resource_id``)."""

    receipt_id: Annotated[str, Text(max_length=100)]
    resource_id: Annotated[str | None, Text(max_length=40)] = None

    EXAMPLE: ClassVar[dict[str, Any]] = {"receipt_id": "rcpt_01HZX3", "resource_id": "res_01HZX3"}


# --- sandbox ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SandboxFaucet:
    """Sandbox USDC to mint to an EVM address (test only), up to the server's cap per
    call."""

    address: Annotated[
        str,
        Text(max_length=42, pattern=EVM_ADDRESS, hint="a 0x-prefixed 20-byte EVM address"),
    ] = attrs.field(metadata={"doc": "Mixed case must be a valid EIP-55 checksum."})
    amount: Decimal

    EXAMPLE: ClassVar[dict[str, Any]] = {
        "address": "0x52908400098527886E0F7030069857D2E4169EE7",
        "amount": "10.00",
    }

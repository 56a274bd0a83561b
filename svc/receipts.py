"""Finding the service receipt id a request presents.

A request unlocks a gate with a receipt in one of three headers (spec, Spend and pay,
rule 2):

* ``X-Svc-Receipt: rcpt_…`` — the service's own header, the id as is;
* ``Payment-Receipt`` — MPP's header: the id as is, or base64url JSON whose ``reference``
  (or ``receipt_id``) is the id;
* ``PAYMENT-RESPONSE`` — x402's header: the id as is, or base64 JSON whose ``receipt_id``
  (or ``transaction``) is the id.

Used by the reference server's gates and by ``svc_asgi``, so both read receipts the same
way.  :func:`rail_credentials` finds the other thing a request can present at a gate: an
open-rail credential (x402's ``PAYMENT-SIGNATURE``, MPP's ``Authorization: Payment``),
which the service settles into a receipt.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping

__all__ = [
    "RAIL_CREDENTIAL_HEADERS",
    "RECEIPT_HEADERS",
    "MalformedReceipt",
    "rail_credentials",
    "receipt_id_from_headers",
]

#: In order of preference when a request carries more than one.
RECEIPT_HEADERS = ("x-svc-receipt", "payment-receipt", "payment-response")
#: Headers that carry an open-rail credential: x402's signed payment and MPP's credential.
RAIL_CREDENTIAL_HEADERS = ("payment-signature", "authorization")
_ID = re.compile(r"^[A-Za-z0-9_\-]{4,100}$")
_MAX_HEADER = 8192
#: The fields of a header's JSON that may name the receipt id, by preference; every header
#: not named here: ``receipt_id``, then ``transaction``.
_ID_FIELDS = {"payment-receipt": ("reference", "receipt_id")}


class MalformedReceipt(ValueError):
    """A receipt header is present but holds no readable receipt id."""


def _decode_json(value: str) -> object:
    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            return json.loads(decode(padded.encode("ascii")))
        except (binascii.Error, ValueError, UnicodeError):
            continue
    raise MalformedReceipt("the receipt header is neither a receipt id nor base64 JSON")


def _from_value(header: str, value: str) -> str:
    value = value.strip()
    if not value or len(value) > _MAX_HEADER:
        raise MalformedReceipt(f"{header} is empty or too long")
    if value.startswith("rcpt_") and _ID.fullmatch(value):
        return value
    decoded = _decode_json(value)
    if not isinstance(decoded, dict):
        raise MalformedReceipt(f"{header} does not hold a JSON object")
    for field in _ID_FIELDS.get(header, ("receipt_id", "transaction")):
        candidate = decoded.get(field)
        if isinstance(candidate, str) and _ID.fullmatch(candidate):
            return candidate
    raise MalformedReceipt(f"{header} names no receipt id")


def receipt_id_from_headers(headers: Mapping[str, str]) -> str | None:
    """The receipt id the request presents, ``None`` if it presents none.

    Raises :class:`MalformedReceipt` when a receipt header is there but unreadable, so a
    gate can answer with a precise reason instead of a generic refusal.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    for header in RECEIPT_HEADERS:
        value = lowered.get(header)
        if value is not None:
            return _from_value(header, value)
    return None


def rail_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """The open-rail credentials a request presents, by lowercase header name.

    ``PAYMENT-SIGNATURE`` (x402) and ``Authorization`` of MPP's ``Payment`` scheme; an
    ``Authorization`` of any other scheme is the app's own login and is left out, so
    that it is never forwarded to the payment service.  Empty when there are none.
    """
    found: dict[str, str] = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered not in RAIL_CREDENTIAL_HEADERS or lowered in found:
            continue
        if lowered == "authorization" and value[:8].lower() != "payment ":
            continue
        found[lowered] = value
    return found

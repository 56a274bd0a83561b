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

A receipt can also be a signed token (a compact JWS the service issues beside the id):
:func:`verify` checks one offline against the service's published keys
(``GET /.well-known/jwks.json``), so a gate needs no round trip to trust it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import attrs

from ._errors import SvcError
from ._models import Jwks

__all__ = [
    "RAIL_CREDENTIAL_HEADERS",
    "RECEIPT_HEADERS",
    "RECEIPT_TOKEN_ALGORITHM",
    "RECEIPT_TOKEN_TYPE",
    "MalformedReceipt",
    "ReceiptTokenError",
    "VerifiedReceipt",
    "is_receipt_token",
    "rail_credentials",
    "receipt_id_from_headers",
    "verify",
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
    if is_receipt_token(value):
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


# --- signed receipt tokens ------------------------------------------------------------------

#: The JWS algorithm of a receipt token (Ed25519) and its ``typ`` header.
RECEIPT_TOKEN_ALGORITHM = "EdDSA"  # noqa: S105 (a name, not a secret)
RECEIPT_TOKEN_TYPE = "svc-receipt+jwt"  # noqa: S105
#: The claims every token has a value for (``seller_id``, ``resource_id`` and ``tx_hash``
#: may be null: a payer's receipt of a paid URL, or a handle payment, names no seller's
#: resource).
_CLAIMS = ("receipt_id", "amount", "currency", "rail", "environment", "iat", "exp")


def is_receipt_token(value: str) -> bool:
    """A compact JWS (three dot-separated parts); a receipt id has no dot."""
    return value.count(".") == 2


class ReceiptTokenError(SvcError):
    """A receipt token that does not prove a payment here: ``reason`` is ``forged`` (bad
    signature or shape), ``expired``, ``unknown_kid`` (signed by a key the JWKS does not
    list) or ``wrong_resource``."""

    def __init__(
        self, message: str, *, reason: str = "forged", request_id: str | None = None
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.reason = reason


@attrs.frozen(kw_only=True)
class VerifiedReceipt:
    """What a valid receipt token proves: this payment was made, as the service signed it."""

    receipt_id: str
    resource_id: str | None
    seller_id: str | None
    amount: Decimal
    currency: str
    rail: str
    environment: str
    tx_hash: str | None
    #: When the token was issued and when it stops proving anything (Unix seconds).
    issued_at: int
    expires_at: int
    kid: str


def verify(
    token: str,
    jwks: Jwks | Mapping[str, Any],
    *,
    now: float | None = None,
    resource_id: str | None = None,
) -> VerifiedReceipt:
    """Check a receipt token against ``jwks`` (the service's ``/.well-known/jwks.json``)
    with no server: signature, expiry at ``now`` (Unix seconds, default the clock) and,
    given ``resource_id``, that it paid for that resource.  Raises
    :class:`ReceiptTokenError` naming why it does not."""
    import jwt  # imported on first use: the SDK's import stays light

    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise ReceiptTokenError("The receipt token is not a JWS.", reason="forged") from None
    kid = header.get("kid")
    keys = jwks.keys if isinstance(jwks, Jwks) else jwks.get("keys", ())
    key = next((k for k in keys if k.get("kid") == kid), None)
    if key is None or header.get("alg") != RECEIPT_TOKEN_ALGORITHM:
        raise ReceiptTokenError(f"No published key {kid!r} signs receipts.", reason="unknown_kid")
    try:
        public = _public_key(json.dumps(key, sort_keys=True))
        claims = jwt.decode(
            token,
            public,
            algorithms=[RECEIPT_TOKEN_ALGORITHM],
            options={"verify_exp": False, "require": list(_CLAIMS)},
        )
    except jwt.PyJWTError as exc:
        raise ReceiptTokenError(
            f"The receipt token's signature fails: {exc}.", reason="forged"
        ) from None
    try:
        proven = _verified(claims, str(kid))
    except (ArithmeticError, ValueError, TypeError) as exc:
        message = f"The receipt token's claims are malformed: {exc}."
        raise ReceiptTokenError(message, reason="forged") from None
    if proven.expires_at <= (time.time() if now is None else now):
        raise ReceiptTokenError("The receipt token has expired.", reason="expired")
    if resource_id is not None and proven.resource_id != resource_id:
        raise ReceiptTokenError(
            f"The receipt did not pay for {resource_id}.", reason="wrong_resource"
        )
    return proven


@functools.lru_cache(maxsize=32)
def _public_key(jwk: str) -> Any:
    """A published key parsed once (a gate checks many tokens against few keys)."""
    import jwt

    return jwt.PyJWK(json.loads(jwk), algorithm=RECEIPT_TOKEN_ALGORITHM)


def _verified(claims: Mapping[str, Any], kid: str) -> VerifiedReceipt:
    amount = Decimal(str(claims["amount"]))
    if not amount.is_finite():
        raise ValueError("the amount is not a number")
    return VerifiedReceipt(
        receipt_id=str(claims["receipt_id"]),
        resource_id=claims.get("resource_id"),
        seller_id=claims.get("seller_id"),
        amount=amount,
        currency=str(claims["currency"]),
        rail=str(claims["rail"]),
        environment=str(claims["environment"]),
        tx_hash=claims.get("tx_hash"),
        issued_at=int(claims["iat"]),
        expires_at=int(claims["exp"]),
        kid=kid,
    )

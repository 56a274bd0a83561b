"""Signed receipt tokens: a receipt anyone can check offline against ``/.well-known/jwks.json``.

Each environment has its own Ed25519 keyring, generated on first use and kept in the
database sealed with the data key (``server_secrets``, like the test hot wallet's key).
The first key signs; :func:`rotate` puts a new one in front and keeps the old ones
published until every token they signed has expired (:data:`LIFETIME` after the
rotation), so a rotation never refuses a token still within its lifetime.

A token lives :data:`LIFETIME` (24 hours): long enough that a gate serves a paid
customer through a day-long outage of the service, short enough that a refunded
receipt stops opening gates within a day even if no gate ever learns of the refund.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm
from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from svc.money import from_micros
from svc.receipts import RECEIPT_TOKEN_ALGORITHM, RECEIPT_TOKEN_TYPE

from .crypto import SecretBox
from .store import tables as t
from .timeutil import as_utc

__all__ = [
    "HEADER",
    "LIFETIME",
    "ReceiptSigner",
    "issue",
    "keyring_name",
    "load",
    "new_keyring",
    "published",
    "rotate",
    "signer",
    "token_for",
]

log = logging.getLogger("reference_server")

#: The header a paid gate answer carries the token in.
HEADER = "X-Svc-Receipt-Token"
#: How long a receipt token is good for (see the module docstring for why).
LIFETIME = timedelta(hours=24)
ENVIRONMENTS = ("test", "live")


def keyring_name(environment: str) -> str:
    """The ``server_secrets`` row holding ``environment``'s sealed keyring."""
    return f"receipt_signing_keys_{environment}"


def _new_key(now: datetime) -> dict[str, Any]:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return {
        "kid": "rk_" + secrets.token_urlsafe(12),
        "pem": pem.decode(),
        "created_at": as_utc(now).isoformat(),
        "retired_at": None,
    }


def new_keyring(box: SecretBox, now: datetime) -> str:
    """A sealed keyring of one fresh key (what a first use stores)."""
    return box.seal(json.dumps([_new_key(now)]))


def _private_key(pem: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("a receipt signing key must be Ed25519")
    return key


class ReceiptSigner:
    """One environment's keyring opened: signs with the current key, publishes the keys
    whose tokens may still be alive."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        current = keys[0]
        self.kid: str = current["kid"]
        self._private = _private_key(current["pem"])

    def sign(self, claims: dict[str, Any], now: datetime) -> str:
        """A compact JWS of ``claims`` with ``iat`` now and ``exp`` :data:`LIFETIME` on."""
        issued = int(as_utc(now).timestamp())
        body = {**claims, "iat": issued, "exp": issued + int(LIFETIME.total_seconds())}
        headers = {"kid": self.kid, "typ": RECEIPT_TOKEN_TYPE}
        return jwt.encode(body, self._private, algorithm=RECEIPT_TOKEN_ALGORITHM, headers=headers)

    def jwks(self, now: datetime) -> dict[str, Any]:
        """The public keys a token alive at ``now`` may be signed with."""
        published = []
        for key in self.keys:
            retired = key["retired_at"]
            if retired is not None and datetime.fromisoformat(retired) + LIFETIME <= as_utc(now):
                continue
            jwk = json.loads(OKPAlgorithm.to_jwk(_private_key(key["pem"]).public_key()))
            published.append({**jwk, "kid": key["kid"], "use": "sig", "alg": "EdDSA"})
        return {"keys": published}


@functools.lru_cache(maxsize=8)
def _opened(box: SecretBox, sealed: str) -> ReceiptSigner:
    return ReceiptSigner(json.loads(box.open(sealed)))


def _sealed(ctx: Any, environment: str) -> str:
    return str(ctx.secret(keyring_name(environment), lambda: new_keyring(ctx.box, ctx.now())))


def load(ctx: Any) -> None:
    """Read (or make) every environment's sealed keyring, not opening it: a database
    whose data key was dropped too soon still starts (see :func:`signer`).  Blocking, for
    ``ServerContext.load_secrets``, before any request's transaction opens."""
    for environment in ENVIRONMENTS:
        _sealed(ctx, environment)


def signer(ctx: Any, environment: str) -> ReceiptSigner | None:
    """``environment``'s signer (``ctx``: the :class:`~reference_server.context.
    ServerContext`); ``None``, logged, when its keyring was sealed under a data key the
    server no longer has: payments go on, without tokens, until the key is restored."""
    return _open(ctx, environment, _sealed(ctx, environment))


def _open(ctx: Any, environment: str, sealed: str) -> ReceiptSigner | None:
    try:
        return _opened(ctx.box, sealed)
    except ValueError as exc:
        log.error("the %s receipt signing keys cannot be opened: %s", environment, exc)
        return None


def published(ctx: Any, now: datetime) -> dict[str, Any]:
    """``GET /.well-known/jwks.json``: every environment's live keys in one set, read from
    the database each time, so a key rotated in by another process is published at once
    (even before this process signs with it)."""
    keys: list[dict[str, Any]] = []
    for environment in ENVIRONMENTS:
        name = keyring_name(environment)
        with ctx.db.read() as conn:
            stored = conn.execute(
                select(t.server_secrets.c.value).where(t.server_secrets.c.name == name)
            ).scalar()
        opened = _open(ctx, environment, str(stored or _sealed(ctx, environment)))
        keys += [] if opened is None else opened.jwks(now)["keys"]
    return {"keys": keys}


def rotate(ctx: Any, conn: Connection, environment: str) -> str:
    """Put a new signing key in front of ``environment``'s keyring (the old ones stay
    published until their tokens expire) and return its ``kid``.  This process signs
    with it at once; others on their next start (their tokens stay valid either way)."""
    opened = signer(ctx, environment)
    if opened is None:
        raise ValueError(f"the {environment} receipt signing keys cannot be opened")
    keys, now = opened.keys, ctx.now()
    retired = [{**key, "retired_at": key["retired_at"] or as_utc(now).isoformat()} for key in keys]
    fresh = _new_key(now)
    sealed = ctx.box.seal(json.dumps([fresh, *retired]))
    name = keyring_name(environment)
    conn.execute(
        update(t.server_secrets).where(t.server_secrets.c.name == name).values(value=sealed)
    )
    ctx.replace_secret(name, sealed)
    return str(fresh["kid"])


def issue(
    ctx: Any,
    now: datetime,
    *,
    receipt_id: str,
    environment: str,
    amount: Decimal,
    rail: str,
    resource_id: str | None = None,
    seller_id: str | None = None,
    tx_hash: str | None = None,
) -> str | None:
    """A token for one settled payment, signed with ``environment``'s current key
    (``None`` when the keys cannot be opened: see :func:`signer`)."""
    claims = {
        "receipt_id": receipt_id,
        "resource_id": resource_id,
        "seller_id": seller_id,
        "amount": str(amount),
        "currency": "USD",
        "rail": rail,
        "environment": environment,
        "tx_hash": tx_hash,
    }
    opened = signer(ctx, environment)
    return None if opened is None else opened.sign(claims, now)


def token_for(ctx: Any, conn: Connection, receipt_id: str, now: datetime) -> str | None:
    """A fresh token for receipt ``receipt_id`` as the database holds it now; ``None``
    for a receipt that proves no payment (unknown, authorized and not captured, released)."""
    r = t.receipts
    row = conn.execute(select(r).where(r.c.id == receipt_id)).first()
    if row is None or row.status != "settled":
        return None
    return issue(
        ctx,
        now,
        receipt_id=row.id,
        environment=row.environment,
        amount=from_micros(row.amount_micros),
        rail=row.rail,
        resource_id=row.resource_id,
        seller_id=row.seller_id,
        tx_hash=row.tx_hash,
    )

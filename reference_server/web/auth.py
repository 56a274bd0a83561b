"""Who is calling, in which environment, and may they use this route.

Three roles, told apart by the credential's shape: a seller key (``svc_sk_<env>_…``), a
wallet key (``svc_vw_<env>_…``, also accepted in ``x-svc-vw-key``) and an owner JWT.
The status rules (DESIGN.md): 401 for a missing or invalid credential, 403 for a valid
credential of the wrong role or the wrong environment.  Ownership checks on objects are
the routes' job and answer 404, so that nobody learns another seller's ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

import attrs
import jwt
from sqlalchemy import Connection, bindparam, select

from svc import Role

from ..domain.ledger import ENVIRONMENTS
from ..domain.principal import Principal
from ..ids import hash_key
from ..store import tables as t
from .errors import ApiError

__all__ = [
    "CREDENTIAL_HEADERS",
    "ENVIRONMENTS",
    "AnyCredential",
    "OptionalAuth",
    "Principal",
    "Role",
    "authenticate",
    "credential_kind",
    "credential_of",
    "issue_owner_jwt",
    "requested_environment",
]

#: What a route taking any role's credential asks for.
ANY_CREDENTIAL = "an owner JWT, a seller key (svc_sk_...) or a wallet key (svc_vw_...)"

_JWT_ALGORITHM = "HS256"
_JWT_ISSUER = "svc"


@attrs.frozen
class OptionalAuth:
    """Anonymous callers are served too; a credential, when sent, must be valid for
    ``role``."""

    role: Role


@attrs.frozen
class AnyCredential:
    """A valid credential of any of ``roles`` is served; the route answers by whose it
    is (a receipt: its payer's or its seller's).  ``roles[0]`` is the route's ``role``
    where one is asked for (the credential the SDK sends first)."""

    roles: tuple[Role, ...] = (Role.WALLET, Role.SELLER, Role.OWNER)


def issue_owner_jwt(owner_id: str, secret: str, now: datetime, ttl_seconds: int) -> str:
    claims = {
        "sub": owner_id,
        "iss": _JWT_ISSUER,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(seconds=ttl_seconds)).timestamp()),
    }
    return jwt.encode(claims, secret, algorithm=_JWT_ALGORITHM)


def requested_environment(headers: Mapping[str, str]) -> str | None:
    value = headers.get("x-svc-environment")
    if value is None:
        return None
    value = value.strip().lower()
    if value not in ENVIRONMENTS:
        raise ApiError(
            "invalid_environment",
            f"X-Svc-Environment must be 'test' or 'live', not {value[:20]!r}.",
        )
    return value


#: Every header :func:`authenticate` reads a caller from: the credential's two places and
#: the environment.  Requests equal in these are the same caller (``POST /pay``'s group
#: commit groups and authenticates by them).
CREDENTIAL_HEADERS = ("authorization", "x-svc-vw-key", "x-svc-owner-jwt", "x-svc-environment")


def credential_of(headers: Mapping[str, str]) -> tuple[str | None, ...]:
    """What identifies the request's caller, before it is authenticated."""
    return tuple(headers.get(name) for name in CREDENTIAL_HEADERS)


def _bearer_token(headers: Mapping[str, str]) -> str | None:
    header = headers.get("authorization")
    if header is not None and header.strip().lower().startswith("payment "):
        # An MPP payment credential (a top-up paid by MPP), not the caller's: the caller's
        # credential comes in its own header then.
        header = None
    if header is None:
        return headers.get("x-svc-vw-key") or headers.get("x-svc-owner-jwt") or None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise ApiError(
            "invalid_credential",
            "Authorization must be 'Bearer <credential>'.",
        )
    return token


_KEY_PREFIXES = {Role.SELLER: "svc_sk_", Role.WALLET: "svc_vw_"}
_KEY_NAMES = {Role.SELLER: "seller key", Role.WALLET: "wallet key"}

#: What a key looks like, for the refusal of something that is not one.
_KEY_SHAPES = {
    Role.SELLER: "a seller key starts svc_sk_test_ or svc_sk_live_",
    Role.WALLET: "a wallet key starts svc_vw_test_ or svc_vw_live_",
}


def _key_environment(token: str, role: Role) -> str:
    rest = token[len(_KEY_PREFIXES[role]) :]
    env, sep, secret = rest.partition("_")
    if not sep or env not in ENVIRONMENTS or not secret:
        raise ApiError(
            "invalid_credential", f"The {_KEY_NAMES[role]} is malformed: {_KEY_SHAPES[role]}."
        )
    return env


def authenticate(
    conn: Connection,
    headers: Mapping[str, str],
    *,
    role: Role | None,
    jwt_secrets: Sequence[str],
    now: datetime,
) -> Principal:
    """Resolve the caller or raise the right 401/403 :class:`ApiError`.  An owner JWT may
    be signed with any of ``jwt_secrets`` (the current key, then retired ones still
    accepted during a rotation).  ``role=None`` takes a valid credential of any role (the
    MCP endpoint, whose tools each need their own)."""
    wanted_env = requested_environment(headers)
    token = _bearer_token(headers)
    if token is None:
        wanted = role.credential_hint if role is not None else ANY_CREDENTIAL
        raise ApiError(
            "unauthenticated",
            f"This route needs {wanted}: send 'Authorization: Bearer <credential>'.",
        )
    if token.startswith(_KEY_PREFIXES[Role.SELLER]):
        principal = _seller_principal(conn, token)
    elif token.startswith(_KEY_PREFIXES[Role.WALLET]):
        principal = _wallet_principal(conn, token)
    elif role in (Role.SELLER, Role.WALLET) and not _jwt_shaped(token):
        # Neither a key nor a JWT, sent where a key is wanted: it was meant as that key
        # (``--seller-key hello``), so say so rather than call it a malformed owner JWT.
        raise ApiError(
            "invalid_credential",
            f"This route needs {role.credential_hint}, and the credential sent is not one: "
            f"{_KEY_SHAPES[role]}.",
        )
    else:
        principal = _owner_principal(conn, token, jwt_secrets, now, wanted_env)

    if role is not None and principal.role is not role:
        raise ApiError(
            "wrong_credential",
            f"This route needs {role.credential_hint}, not {principal.role.credential_hint}.",
        )
    if wanted_env is not None and wanted_env != principal.environment:
        raise ApiError(
            "environment_mismatch",
            f"X-Svc-Environment is {wanted_env!r} but the key belongs to "
            f"{principal.environment!r}; use a {wanted_env} key.",
        )
    return principal


def credential_kind(headers: Mapping[str, str]) -> str:
    """What kind of credential a request sent (``seller_key``, ``wallet_key``,
    ``owner_jwt``, ``other``, ``malformed`` or ``none``), for logs: never the credential
    itself."""
    try:
        token = _bearer_token(headers)
    except ApiError:  # the request was refused for it (401); the log says why
        return "malformed"
    if token is None:
        return "none"
    if token.startswith(_KEY_PREFIXES[Role.SELLER]):
        return "seller_key"
    if token.startswith(_KEY_PREFIXES[Role.WALLET]):
        return "wallet_key"
    return "owner_jwt" if _jwt_shaped(token) else "other"


def _jwt_shaped(token: str) -> bool:
    """Three dot-separated parts: what a JWT looks like before it is verified."""
    return token.count(".") == 2


def _seller_principal(conn: Connection, token: str) -> Principal:
    _key_environment(token, Role.SELLER)
    row = conn.execute(
        select(
            t.seller_keys.c.id,
            t.seller_keys.c.seller_id,
            t.seller_keys.c.environment,
            t.sellers.c.owner_id,
        )
        .join(t.sellers, t.sellers.c.id == t.seller_keys.c.seller_id)
        .where(t.seller_keys.c.key_hash == hash_key(token), t.seller_keys.c.revoked_at.is_(None))
    ).first()
    if row is None:
        raise ApiError("invalid_credential", "Unknown or revoked seller key.")
    return Principal(
        role=Role.SELLER,
        environment=row.environment,
        owner_id=row.owner_id,
        subject_id=row.seller_id,
        credential_id=f"sk:{row.id}",
    )


_w = t.wallet_keys
# Built once (bound at execution): every request with a wallet key runs it.
_WALLET_BY_HASH = select(_w.c.id, _w.c.owner_id, _w.c.environment, _w.c.status).where(
    _w.c.key_hash == bindparam("key_hash")
)


def _wallet_principal(conn: Connection, token: str) -> Principal:
    _key_environment(token, Role.WALLET)
    row = conn.execute(_WALLET_BY_HASH, {"key_hash": hash_key(token)}).first()
    if row is None:
        raise ApiError("invalid_credential", "Unknown wallet key.")
    if row.status != "active":
        raise ApiError("invalid_credential", "This wallet key is revoked.")
    return Principal(
        role=Role.WALLET,
        environment=row.environment,
        owner_id=row.owner_id,
        subject_id=row.id,
        credential_id=f"vw:{row.id}",
    )


def _verified_claims(token: str, secrets: Sequence[str]) -> dict[str, object]:
    for secret in secrets:
        try:
            return dict(
                jwt.decode(
                    token,
                    secret,
                    algorithms=[_JWT_ALGORITHM],
                    issuer=_JWT_ISSUER,
                    options={"require": ["sub", "exp", "iat"], "verify_exp": False},
                )
            )
        except jwt.InvalidSignatureError:
            continue  # signed with another (perhaps retired) key: try the next one
        except jwt.PyJWTError:
            break
    raise ApiError("invalid_credential", "The owner JWT is malformed or its signature is invalid.")


def _owner_principal(
    conn: Connection, token: str, secrets: Sequence[str], now: datetime, wanted_env: str | None
) -> Principal:
    claims = _verified_claims(token, secrets)
    # Expiry is checked against the server's clock (injectable in tests), not the OS clock.
    expires = claims.get("exp")
    if not isinstance(expires, int) or expires <= now.timestamp():
        raise ApiError("invalid_credential", "The owner JWT has expired; create a new one.")
    owner_id = claims.get("sub")
    exists = conn.execute(select(t.owners.c.id).where(t.owners.c.id == owner_id)).first()
    if not isinstance(owner_id, str) or exists is None:
        raise ApiError("invalid_credential", "The owner JWT names no known owner.")
    environment = wanted_env or "live"
    return Principal(
        role=Role.OWNER,
        environment=environment,
        owner_id=owner_id,
        credential_id=f"owner:{owner_id}:{environment}",
    )

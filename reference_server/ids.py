"""Identifiers and secrets.

Object ids are ``<prefix>_<26 chars>``: a millisecond timestamp then randomness, so ids
sort by creation time (handy in logs and pagination) and never collide in practice.
Keys are 256-bit random strings with a role and environment prefix (``svc_sk_test_…``);
only their SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import secrets
import time

__all__ = ["hash_key", "new_id", "new_key", "new_short_id"]

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _encode(number: int, length: int) -> str:
    out = []
    for _ in range(length):
        number, rem = divmod(number, 32)
        out.append(_CROCKFORD[rem])
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    millis = int(time.time() * 1000)
    return f"{prefix}_{_encode(millis, 10)}{_encode(secrets.randbits(80), 16)}"


def new_short_id(length: int = 10) -> str:
    return "".join(secrets.choice(_BASE62) for _ in range(length))


def new_key(role: str, environment: str) -> str:
    """``svc_sk_test_…`` / ``svc_vw_live_…``: role and environment readable at a glance."""
    return f"svc_{role}_{environment}_{secrets.token_urlsafe(32)}"


def hash_key(key: str) -> str:
    # Keys carry 256 bits of entropy, so a plain SHA-256 cannot be brute-forced and keeps
    # lookups a single indexed equality (as GitHub does for its tokens).
    return hashlib.sha256(key.encode("utf-8")).hexdigest()

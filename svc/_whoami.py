"""``svc whoami``: which credentials the command holds and what the service makes of them.

There is no "who am I" route, so each credential is checked by the cheapest call its role
may make, which also tells who it is: an owner JWT lists one seller (``GET /sellers``; the
owner id is the JWT's own ``sub``), a seller key reads its seller (``GET /sellers/me``), a
wallet key its balance (``GET /spend/balance``).  A refusal is kept with the credential it
refused, so the report names the credential the user gave, not the one a route wanted.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ._client import Client
from ._errors import APIError

__all__ = ["CREDENTIALS", "Refusal", "check_credentials"]

#: Each credential option, as a person calls it.
CREDENTIALS = {"owner_jwt": "owner JWT", "seller_key": "seller key", "wallet_key": "wallet key"}


class Refusal(Exception):
    """A credential the service refused: which one, where it came from, and the answer."""

    def __init__(self, credential: str, source: str, error: APIError) -> None:
        super().__init__(f"the {credential} ({source}) was refused")
        self.credential, self.source, self.error = credential, source, error


def _jwt_claims(token: str) -> dict[str, Any]:
    """The JWT's claims, unverified: read only once the service has accepted it."""
    try:
        part = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def _owner(client: Client, token: str) -> dict[str, Any]:
    client.sellers.list(limit=1)
    claims = _jwt_claims(token)
    expires = claims.get("exp")
    return {
        "role": "owner",
        "owner_id": claims.get("sub"),
        "environment": client.environment or "live",
        "expires_at": (
            datetime.fromtimestamp(expires, UTC).isoformat() if isinstance(expires, int) else None
        ),
    }


def _seller(client: Client, _key: str) -> dict[str, Any]:
    seller = client.sellers.me()
    return {
        "role": "seller",
        "seller_id": seller.id,
        "name": seller.name,
        "environment": seller.environment,
    }


def _wallet(client: Client, _key: str) -> dict[str, Any]:
    balance = client.spend.balance()
    return {
        "role": "wallet",
        "wallet_key_id": balance.wallet_key_id,
        "environment": balance.environment,
        "status": balance.status,
        "balance": balance.balance,
    }


_CHECKS: dict[str, Callable[[Client, str], dict[str, Any]]] = {
    "owner_jwt": _owner,
    "seller_key": _seller,
    "wallet_key": _wallet,
}


def check_credentials(
    client: Client, given: Mapping[str, str], sources: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[Refusal]]:
    """One entry per credential in ``given`` (option name -> value), each checked with the
    service: who it is, or ``refused`` with the service's answer."""
    entries: list[dict[str, Any]] = []
    refusals: list[Refusal] = []
    for name, credential in CREDENTIALS.items():
        if name not in given:
            continue
        entry: dict[str, Any] = {"credential": credential, "from": sources[name]}
        try:
            entry.update(_CHECKS[name](client, given[name]))
        except APIError as exc:
            entry["refused"] = f"{exc.status} {exc.code}: {exc.message}"
            refusals.append(Refusal(credential, sources[name], exc))
        entries.append(entry)
    return entries, refusals

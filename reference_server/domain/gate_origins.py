"""Whose gates answer at a URL: the service's own hosted gates, or an owner's origin.

A seller's ``svc_asgi`` gate asks the service to challenge and redeem payments for the
URL its client addressed.  x402 binds a credential to that URL and nothing else that
tells sellers apart (every ``processor_deposit`` seller shares the payee), so the URL
itself must be the redeeming seller's: either this resource's hosted gate on the
service's own origin, or an origin held by the seller's owner.  An origin is held by the
first owner whose gate asks there, per environment (a gate asks a challenge before any
payer can sign for its URL); another owner's gate is then refused there.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from ..store import tables as t
from .errors import DomainError

__all__ = ["check_url", "claim_origin", "origin_of"]

_g = t.gate_origins
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOLDER = select(_g.c.owner_id).where(
    _g.c.environment == bindparam("environment"), _g.c.origin == bindparam("origin")
)
_HOSTED = re.compile(r"(?:/api)?/g/([^/]+)")
_SHORT_ID = select(t.resources.c.id).where(t.resources.c.short_id == bindparam("short_id"))
_CLAIM = {
    name: dialect.insert(_g).on_conflict_do_nothing()
    for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))
}


def origin_of(url: str) -> str:
    """``scheme://host[:port]``, lowercased, the scheme's default port left out: one
    spelling per origin (``HTTPS://Shop.example:443/x`` is ``https://shop.example``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def check_url(conn: Connection, *, url: str, public_url: str, resource: Any, seller: Any) -> bool:
    """Whether ``url`` is ``seller``'s to charge ``resource`` at: ``True``; ``False`` when
    its origin is nobody's yet (a challenge there claims it: :func:`claim_origin`).
    Raises :class:`DomainError` (403 ``url_not_owned``) when it is somebody else's."""
    hosted = _HOSTED.fullmatch(urlsplit(url).path)
    if hosted is not None and conn.execute(_SHORT_ID, {"short_id": hosted[1]}).first():
        # A hosted gate's path (whatever host the caller says the service has): only
        # this resource's own.
        if hosted[1] != resource.short_id:
            raise _not_owned(url, "it is another resource's hosted gate")
        return True
    origin = origin_of(url)
    if origin == origin_of(public_url):
        raise _not_owned(url, "on the service's own origin only the resource's gate_url is")
    holder = conn.execute(_HOLDER, {"environment": seller.environment, "origin": origin})
    owner_id = holder.scalar()
    if owner_id is not None and owner_id != seller.owner_id:
        raise _not_owned(url, "its origin is another account's gate")
    return owner_id is not None


def claim_origin(conn: Connection, *, url: str, seller: Any, now: datetime) -> None:
    """Hold ``url``'s origin for ``seller``'s owner, unless another owner got there first
    (then :class:`DomainError` 403 ``url_not_owned``)."""
    params = {"environment": seller.environment, "origin": origin_of(url)}
    conn.execute(
        _CLAIM[conn.dialect.name],
        {**params, "owner_id": seller.owner_id, "seller_id": seller.id, "created_at": now},
    )
    if conn.execute(_HOLDER, params).scalar() != seller.owner_id:
        raise _not_owned(url, "its origin is another account's gate")


def _not_owned(url: str, why: str) -> DomainError:
    return DomainError(
        "url_not_owned",
        f"{url} is not a URL of this seller's gates ({why}): a gate charges only for its own URLs.",
        details={"origin": origin_of(url)},
    )

"""The service's receipt-signing keys as a gate keeps them, so a signed receipt token is
checked with no round trip (:func:`svc.receipts.verify`).

Fetched once (``GET /.well-known/jwks.json`` through the backend), then kept: refreshed
only when a token names a ``kid`` the set lacks (a rotation), at most once every
:data:`REFRESH_INTERVAL` seconds so forged kids cannot make the gate hammer the service,
and never dropped when the service does not answer, so the gate keeps serving paid
customers through an outage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from svc import Jwks
from svc.receipts import ReceiptTokenError, VerifiedReceipt, verify

from ._backend import BackendUnavailable, GateBackend

__all__ = ["REFRESH_INTERVAL", "KeySet"]

log = logging.getLogger("svc_asgi")

#: The least time between two fetches of the key set.
REFRESH_INTERVAL = 30.0


def _kid(token: str) -> str | None:
    import jwt  # the SDK's verify imports it too, on first use

    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        return None
    return kid if isinstance(kid, str) else None


class KeySet:
    """The key set one gate verifies receipt tokens with (see the module docstring)."""

    def __init__(
        self,
        backend: GateBackend,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.backend = backend
        self._clock = clock
        self._wall_clock = wall_clock
        self._jwks: Jwks | None = None
        self._kids: frozenset[str] = frozenset()
        self._fetched_at: float | None = None
        self._lock = anyio.Lock()

    async def verify(self, token: str, resource_id: str | None) -> VerifiedReceipt:
        """``token`` checked against the keys (fetched first when its ``kid`` is new).
        Raises :class:`~svc.receipts.ReceiptTokenError`, or
        :class:`~svc_asgi.BackendUnavailable` when no key set was ever had."""
        kid = _kid(token)
        if kid is None:
            raise ReceiptTokenError("The receipt token is not a JWS.", reason="forged")
        if kid not in self._kids:
            await self._refresh()
        if self._jwks is None:
            raise BackendUnavailable("the service's receipt keys were never fetched")
        return verify(token, self._jwks, now=self._wall_clock(), resource_id=resource_id)

    async def _refresh(self) -> None:
        async with self._lock:  # single flight: the others find the fresh set
            last = self._fetched_at
            if last is not None and self._clock() - last < REFRESH_INTERVAL:
                return
            self._fetched_at = self._clock()
            try:
                jwks = await self.backend.jwks()
            except BackendUnavailable as exc:
                log.warning("fetching the receipt keys failed (kept the old ones): %s", exc)
                return
            self._jwks = jwks
            self._kids = frozenset(_kids_of(jwks.keys))


def _kids_of(keys: list[dict[str, Any]]) -> list[str]:
    return [key["kid"] for key in keys if isinstance(key.get("kid"), str)]

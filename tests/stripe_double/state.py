"""What the double remembers between requests: Connect accounts and their balances,
transfers, payouts, Checkout Sessions, idempotent answers, faults and the request log.

All of it lives on the double's event loop (one uvicorn thread), so no locks."""

from __future__ import annotations

from typing import Any

import attrs

from .events import Emitter

__all__ = ["DEFAULT_PLATFORM_BALANCE", "Fault", "State"]

DEFAULT_PLATFORM_BALANCE = 10**12


@attrs.define
class Fault:
    """The next ``times`` requests under ``path_prefix`` answer ``status`` (or are dropped)."""

    path_prefix: str
    times: int
    status: int | None = None
    drop: bool = False


@attrs.define
class Stored:
    """An idempotent request's first answer, replayed for the same key."""

    method: str
    path: str
    params: dict[str, Any]
    status: int
    body: bytes
    content_type: str


@attrs.define
class State:
    localstripe: str
    emitter: Emitter = attrs.Factory(Emitter)
    platform_available: int = DEFAULT_PLATFORM_BALANCE
    accounts: dict[str, dict[str, Any]] = attrs.Factory(dict)
    links: dict[str, dict[str, Any]] = attrs.Factory(dict)
    transfers: dict[str, dict[str, Any]] = attrs.Factory(dict)
    #: Connected accounts' payouts, and which account each belongs to.
    payouts: dict[str, dict[str, Any]] = attrs.Factory(dict)
    payout_owner: dict[str, str] = attrs.Factory(dict)
    #: Connected accounts' available balance per currency.
    balances: dict[str, dict[str, int]] = attrs.Factory(dict)
    sessions: dict[str, dict[str, Any]] = attrs.Factory(dict)
    #: The Authorization header each session was created with (to pay it in localstripe).
    session_auth: dict[str, str] = attrs.Factory(dict)
    session_pi_metadata: dict[str, dict[str, str]] = attrs.Factory(dict)
    idempotent: dict[tuple[str | None, str], Stored] = attrs.Factory(dict)
    faults: list[Fault] = attrs.Factory(list)
    requests: list[dict[str, Any]] = attrs.Factory(list)
    #: How many of the next refunds answer ``pending`` (a refund still in flight at the
    #: card network): no ``charge.refunded`` is sent for them.
    pending_refunds: int = 0

    def reset(self) -> None:
        localstripe = self.localstripe
        self.emitter.reset()
        fresh = State(localstripe=localstripe, emitter=self.emitter)
        for field in attrs.fields(State):
            if field.name not in ("localstripe", "emitter"):
                setattr(self, field.name, getattr(fresh, field.name))

    def take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if path.startswith(fault.path_prefix) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

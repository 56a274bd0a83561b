"""Connect payouts through Stripe (to be written): accounts, links, withdrawals, and the
events that move them."""

from __future__ import annotations

from .events import Handler

__all__ = ["HANDLERS"]

#: Event type -> what applying it does.
HANDLERS: dict[str, Handler] = {}

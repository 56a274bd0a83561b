"""Card payments and card top-ups through Stripe Checkout (to be written)."""

from __future__ import annotations

from .events import Handler

__all__ = ["HANDLERS"]

#: Event type -> what applying it does.
HANDLERS: dict[str, Handler] = {}

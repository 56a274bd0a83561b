"""The official SDK's client for the server's settings.

One client per call site is cheap (it holds keys and addresses, and shares the SDK's HTTP
client); retries with backoff are the SDK's own (``max_network_retries``), which also sends
each retried ``POST`` with the same idempotency key.
"""

from __future__ import annotations

import stripe

from ..settings import Settings

__all__ = ["stripe_client", "uses_stripe"]


def uses_stripe(settings: Settings, environment: str) -> bool:
    """Whether ``environment``'s cards and payouts go through Stripe: ``live`` with
    ``SVC_PROCESSOR=stripe``; ``test`` always has the sandbox."""
    return environment == "live" and settings.processor == "stripe"


def stripe_client(settings: Settings) -> stripe.StripeClient:
    if settings.stripe_secret_key is None:
        raise ValueError("SVC_STRIPE_SECRET_KEY is not set")
    base = settings.stripe_api_base
    return stripe.StripeClient(
        settings.stripe_secret_key,
        base_addresses={} if base is None else {"api": base.rstrip("/")},
        max_network_retries=settings.stripe_max_network_retries,
    )

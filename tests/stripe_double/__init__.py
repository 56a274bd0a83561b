"""A local Stripe for tests: the endpoints localstripe lacks (Connect accounts, account and
login links, transfers, connected-account payouts and balances, Checkout Sessions), events
signed as Stripe signs them, faults, and everything else forwarded to a real localstripe.

``objects.json`` holds Stripe's published example objects (``stripe/openapi``'s
``fixtures3.json``, MIT: see ``STRIPE_FIXTURES_LICENSE``); the double changes only ids and
the fields its endpoints are about.
"""

from .running import StripeDouble, running_stripe_double

__all__ = ["StripeDouble", "running_stripe_double"]

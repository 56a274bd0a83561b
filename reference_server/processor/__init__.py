"""The processor behind ``live`` cards, card top-ups and payouts: Stripe, through its
official SDK, chosen by ``SVC_PROCESSOR=stripe`` (the sandbox stays the default and is
always ``test``'s).

* :mod:`.client` -- the SDK's client for these settings, whether an environment uses it,
  and where the pages Stripe hosts for a person are served from;
* :mod:`.webhooks` -- ``POST /processor/webhooks``: an event verified with the SDK, recorded
  once by its id and applied in the same transaction;
* :mod:`.connect` -- Connect accounts, links and withdrawals behind
  :class:`~reference_server.domain.payouts.PayoutProcessor`, and the events that move them;
* :mod:`.checkout` -- card payments and card top-ups through Checkout Sessions, booked when
  ``checkout.session.completed`` arrives.
"""

from __future__ import annotations

from .client import hosted_origin, stripe_client, uses_stripe

__all__ = ["hosted_origin", "stripe_client", "uses_stripe"]

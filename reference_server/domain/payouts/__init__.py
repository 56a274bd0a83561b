"""Payouts: a seller's money leaves for a bank account.

* :mod:`.processor` -- the seam: what the service asks of a payout processor;
* :mod:`.sandbox` -- the embedded sandbox processor (state in the database, onboarding
  completed by a human on a page the reference server serves);
* :mod:`.connect` -- the seller's payout account: onboard, sync, login, auto payout;
* :mod:`.withdrawals` -- withdraw through the ledger, list, read;
* :mod:`.progress` -- what the outbox worker runs: payouts advanced, auto payouts started.
"""

from __future__ import annotations

from ...settings import Settings
from ..errors import DomainError
from .processor import AccountStatus, Link, PayoutProcessor, PayoutStatus
from .sandbox import SandboxProcessor

__all__ = [
    "AccountStatus",
    "Link",
    "PayoutProcessor",
    "PayoutStatus",
    "processor_for",
]


def processor_for(settings: Settings, environment: str, *, public_url: str) -> PayoutProcessor:
    """The processor that pays sellers of ``environment``: Stripe Connect for ``live`` with
    ``SVC_PROCESSOR=stripe``; otherwise the sandbox, but for ``live`` in production, which
    needs a real processor and refuses until it has one."""
    if environment == "live" and settings.processor == "stripe":
        from ...processor.connect import stripe_connect  # the stripe SDK, only when used

        return stripe_connect(settings, public_url=public_url)
    if environment == "live" and settings.production:
        raise DomainError(
            "payouts_unavailable",
            "Live payouts need a payout processor (SVC_PROCESSOR=stripe with its keys); "
            "this server has only the sandbox.",
        )
    return SandboxProcessor(
        public_url=public_url.rstrip("/"),
        link_seconds=settings.connect_link_seconds,
        step_seconds=settings.sandbox_payout_seconds,
    )

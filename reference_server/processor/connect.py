"""Connect payouts through Stripe: :class:`StripeConnect` behind
:class:`~reference_server.domain.payouts.PayoutProcessor` (the events that move accounts
and payouts are :mod:`.connect_events`').

A withdrawal is two calls: a Transfer from the platform's balance to the seller's
connected account, then a Payout on that account to its bank.  Each is sent with an
idempotency key derived from our withdrawal id, so a worker step retried after a crash or a
timeout gets the same transfer and payout back and never pays twice.  Stripe moves money in
cents: a withdrawal through it is whole cents (:attr:`StripeConnect.unit_micros`).

Errors: the network, 429 and 5xx are retried by the SDK; what still fails is
``processor_unavailable`` (the worker keeps the withdrawal ``pending`` and asks again
later, a route answers 503); a refusal (4xx) is ``processor_refused``, with Stripe's code and
message, and fails a withdrawal with them as its reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import attrs
import stripe
from sqlalchemy import Connection

from ..domain.errors import DomainError
from ..domain.payouts.processor import AccountStatus, Link, PayoutState, PayoutStatus
from ..settings import Settings
from .client import stripe_client

__all__ = ["StripeConnect", "payout_status", "status_of", "stripe_connect"]

#: Micros in a cent: Stripe's smallest unit of USD.
CENT_MICROS = 10_000
#: A Standard account has no login link: its owner signs in to Stripe's own dashboard.
STANDARD_DASHBOARD = "https://dashboard.stripe.com/"
#: How long Stripe keeps an account link usable (it says "a few minutes"; we promise less).
_LINK_SECONDS = 300

_STATES: dict[str, PayoutState] = {
    "pending": "pending",
    "in_transit": "in_transit",
    "paid": "paid",
    "failed": "failed",
    "canceled": "failed",
}


def stripe_connect(settings: Settings, *, public_url: str) -> StripeConnect:
    return StripeConnect(client=stripe_client(settings), public_url=public_url.rstrip("/"))


@contextmanager
def _calling_stripe() -> Iterator[None]:
    """Stripe's errors as ours: transient ones (after the SDK's retries) and refusals."""
    try:
        yield
    except (stripe.APIConnectionError, stripe.RateLimitError) as exc:
        raise _unavailable(exc) from None
    except stripe.StripeError as exc:
        if exc.http_status is None or exc.http_status >= 500 or exc.http_status == 409:
            raise _unavailable(exc) from None
        error = exc.error
        code = (error.code if error is not None else None) or exc.code or "refused"
        raise DomainError(
            "processor_refused",
            f"Stripe refused: {code}: {exc.user_message or str(exc)}",
            details={"processor_code": code},
        ) from None


def _unavailable(exc: stripe.StripeError) -> DomainError:
    return DomainError(
        "processor_unavailable",
        f"Stripe could not be reached or is failing ({type(exc).__name__}); nothing was "
        "changed by this call, try again shortly.",
    )


@attrs.frozen(kw_only=True)
class StripeConnect:
    """Accounts, links and payouts at Stripe; ``conn`` is never used (state is Stripe's)."""

    client: stripe.StripeClient
    public_url: str
    name: str = "stripe"
    remote: bool = True
    unit_micros: int = CENT_MICROS

    def create_account(
        self,
        conn: Connection | None,
        *,
        seller_id: str,
        environment: str,
        country: str,
        type: str,
        now: datetime,
    ) -> str:
        with _calling_stripe():
            account = self.client.v1.accounts.create(
                {
                    "type": "standard" if type == "standard" else "express",
                    "country": country,
                    "metadata": {"svc_seller_id": seller_id, "svc_environment": environment},
                },
                # One account per seller, however many onboard calls race to open it.
                {"idempotency_key": f"{seller_id}:account"},
            )
        return account.id

    def onboarding_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        with _calling_stripe():
            link = self.client.v1.account_links.create(
                {
                    "account": account_id,
                    "type": "account_onboarding",
                    "refresh_url": f"{self.public_url}/processor/connect/refresh",
                    "return_url": f"{self.public_url}/processor/connect/return",
                }
            )
        return Link(url=link.url, expires_at=datetime.fromtimestamp(link.expires_at, UTC))

    def login_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        with _calling_stripe():
            account = self.client.v1.accounts.retrieve(account_id)
            if account.type == "standard":
                return Link(url=STANDARD_DASHBOARD, expires_at=_later(now, 24 * 3600))
            link = self.client.v1.accounts.login_links.create(account_id)
        return Link(url=link.url, expires_at=_later(now, _LINK_SECONDS))

    def account_status(self, conn: Connection | None, account_id: str) -> AccountStatus:
        with _calling_stripe():
            account = self.client.v1.accounts.retrieve(account_id)
        return status_of(account.to_dict())

    def create_payout(
        self,
        conn: Connection | None,
        account_id: str,
        *,
        amount_micros: int,
        reference: str,
        now: datetime,
    ) -> str:
        cents, rest = divmod(amount_micros, CENT_MICROS)
        if rest or cents <= 0:
            raise DomainError("validation_error", "A payout through Stripe is whole cents.")
        with _calling_stripe():
            self.client.v1.transfers.create(
                {
                    "amount": cents,
                    "currency": "usd",
                    "destination": account_id,
                    "transfer_group": reference,
                    "metadata": {"svc_withdrawal_id": reference},
                },
                {"idempotency_key": f"{reference}:transfer"},
            )
            payout = self.client.v1.payouts.create(
                {
                    "amount": cents,
                    "currency": "usd",
                    "metadata": {"svc_withdrawal_id": reference},
                },
                {"idempotency_key": f"{reference}:payout", "stripe_account": account_id},
            )
        return payout.id

    def payout_status(
        self, conn: Connection | None, account_id: str, payout_id: str, *, now: datetime
    ) -> PayoutStatus:
        with _calling_stripe():
            payout = self.client.v1.payouts.retrieve(
                payout_id, options={"stripe_account": account_id}
            )
        return payout_status(payout.status, payout.failure_code, payout.failure_message)


def _later(now: datetime, seconds: int) -> datetime:
    return datetime.fromtimestamp(now.timestamp() + seconds, UTC)


def status_of(account: Mapping[str, Any]) -> AccountStatus:
    """An account object (as JSON: an event's, or the SDK's ``to_dict()``) as our
    readiness flags."""
    due = (account.get("requirements") or {}).get("currently_due") or []
    return AccountStatus(
        details_submitted=bool(account.get("details_submitted")),
        payouts_enabled=bool(account.get("payouts_enabled")),
        requirements_due=tuple(str(item) for item in due),
    )


def payout_status(status: str, code: str | None, message: str | None) -> PayoutStatus:
    state = _STATES.get(status, "pending")
    reason = None
    if state == "failed":
        reason = f"{code or 'failed'}: {message or 'the payout failed at the processor'}"
    return PayoutStatus(status=state, failure_reason=reason)

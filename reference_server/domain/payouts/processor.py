"""The payout processor seam: what the service asks of whoever moves money to a bank.

One small interface (:class:`PayoutProcessor`): open a payout account, hand out an
onboarding link and a login link, read the account's readiness, create a payout and read
its status.  The embedded default is the sandbox (:mod:`.sandbox`), whose state is rows in
the service's own database; a real processor is one new module implementing the same
methods, chosen in :func:`processor_for`.

Every method takes the caller's open transaction (``conn``): the sandbox keeps its state
there, so an account, a link or a payout commits together with the row that names it.  A
processor behind the network (``remote``) ignores it, and the worker calls it with
``None``, outside any transaction, so that no database lock waits on the network.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

import attrs
from sqlalchemy import Connection

__all__ = [
    "AccountStatus",
    "Link",
    "PayoutProcessor",
    "PayoutState",
    "PayoutStatus",
]

PayoutState = Literal["pending", "in_transit", "paid", "failed"]


@attrs.frozen(kw_only=True)
class AccountStatus:
    """A payout account's readiness, as the processor sees it now."""

    details_submitted: bool
    payouts_enabled: bool
    #: What the account still needs before payouts are enabled (processor's names).
    requirements_due: tuple[str, ...]


@attrs.frozen(kw_only=True)
class Link:
    """A page for a human (onboarding or the account's dashboard), usable until ``expires_at``."""

    url: str
    expires_at: datetime


@attrs.frozen(kw_only=True)
class PayoutStatus:
    status: PayoutState
    failure_reason: str | None = None


class PayoutProcessor(Protocol):
    @property
    def name(self) -> str:
        """Stored beside every account and withdrawal it holds (``sandbox``)."""
        ...

    @property
    def remote(self) -> bool:
        """Behind the network: called outside transactions where the caller can."""
        ...

    @property
    def unit_micros(self) -> int:
        """The smallest amount it pays out (a cent is 10 000 micros); withdrawals are whole
        multiples of it."""
        ...

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
        """Open a payout account for the seller; its id at the processor."""
        ...

    def onboarding_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        """A fresh link where a human completes the account (KYC, bank account)."""
        ...

    def login_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        """A fresh link to the account's dashboard (once onboarded)."""
        ...

    def account_status(self, conn: Connection | None, account_id: str) -> AccountStatus:
        """The account's readiness flags now."""
        ...

    def create_payout(
        self,
        conn: Connection | None,
        account_id: str,
        *,
        amount_micros: int,
        reference: str,
        now: datetime,
    ) -> str:
        """Send ``amount_micros`` to the account's bank account; the payout's id.  Creating
        it again with the same ``reference`` returns the same payout."""
        ...

    def payout_status(
        self, conn: Connection | None, account_id: str, payout_id: str, *, now: datetime
    ) -> PayoutStatus:
        """Where the payout is now."""
        ...

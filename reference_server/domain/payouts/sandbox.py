"""The sandbox payout processor: the embedded default behind :class:`.PayoutProcessor`.

Its state is rows in the service's database (``sandbox_payout_accounts``,
``sandbox_account_links``, ``sandbox_payouts``), so it survives restarts and every server
process agrees on it.  A human completes onboarding on a page the reference server serves
(``routes/sandbox_connect.py``) from the link :meth:`SandboxProcessor.onboarding_link`
hands out: a one-time token that expires.  Nothing else completes an account, so an API
call alone never does.

Payouts advance by time alone: ``pending``, then ``in_transit`` after
``step_seconds``, then ``paid`` after twice that -- or ``failed`` when the account's bank
account was the failing one when the payout was created.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, Row, insert, select, update

from ...ids import hash_key, new_id
from ...invariant import InvariantError
from ...store import tables as t
from ...timeutil import as_utc
from ..errors import DomainError
from .processor import AccountStatus, Link, PayoutState, PayoutStatus

__all__ = [
    "BANK_ACCOUNTS",
    "REQUIREMENTS",
    "OpenLink",
    "SandboxProcessor",
    "open_link",
    "payouts_of",
    "submit_onboarding",
]

_acct = t.sandbox_payout_accounts
_links = t.sandbox_account_links
_payouts = t.sandbox_payouts

#: The bank accounts the onboarding page offers: payouts to the second one fail.
BANK_ACCOUNTS = {"succeeds": "000123456789", "fails": "000111111116"}
#: What an account needs before payouts are enabled, by the processor's names.
REQUIREMENTS = ("legal_name", "external_account", "tos_acceptance")
#: Due when the human leaves the page with "finish later": identity not yet verified.
VERIFICATION = "individual.verification.document"
FAILURE_REASON = "account_closed: the sandbox's failing bank account refuses every payout"


@attrs.frozen(kw_only=True)
class SandboxProcessor:
    """The sandbox behind :class:`.PayoutProcessor`; links point at ``public_url``."""

    public_url: str
    link_seconds: float
    step_seconds: float
    name: str = "sandbox"
    remote: bool = False
    unit_micros: int = 1

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
        conn = _here(conn)
        account_id = new_id("sbacct")
        conn.execute(
            insert(_acct).values(
                id=account_id,
                environment=environment,
                type=type,
                country=country,
                tos_accepted=False,
                details_submitted=False,
                payouts_enabled=False,
                requirements_due=list(REQUIREMENTS),
                created_at=now,
                updated_at=now,
            )
        )
        return account_id

    def onboarding_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        return self._link(_here(conn), account_id, "onboarding", now)

    def login_link(self, conn: Connection | None, account_id: str, *, now: datetime) -> Link:
        return self._link(_here(conn), account_id, "login", now)

    def _link(self, conn: Connection, account_id: str, kind: str, now: datetime) -> Link:
        token = secrets.token_urlsafe(32)
        expires = now + timedelta(seconds=self.link_seconds)
        conn.execute(
            insert(_links).values(
                token_hash=hash_key(token),
                account_id=account_id,
                kind=kind,
                expires_at=expires,
                created_at=now,
            )
        )
        path = "onboard" if kind == "onboarding" else "login"
        return Link(url=f"{self.public_url}/sandbox/connect/{path}/{token}", expires_at=expires)

    def account_status(self, conn: Connection | None, account_id: str) -> AccountStatus:
        row = _account(_here(conn), account_id)
        return AccountStatus(
            details_submitted=row.details_submitted,
            payouts_enabled=row.payouts_enabled,
            requirements_due=tuple(row.requirements_due or ()),
        )

    def create_payout(
        self,
        conn: Connection | None,
        account_id: str,
        *,
        amount_micros: int,
        reference: str,
        now: datetime,
    ) -> str:
        conn = _here(conn)
        existing = conn.execute(
            select(_payouts.c.id).where(_payouts.c.reference == reference)
        ).scalar()
        if existing is not None:
            return str(existing)
        account = _account(conn, account_id)
        if not account.payouts_enabled:
            raise DomainError("payouts_not_enabled", "The payout account cannot receive payouts.")
        payout_id = new_id("sbpo")
        conn.execute(
            insert(_payouts).values(
                id=payout_id,
                account_id=account_id,
                amount_micros=amount_micros,
                reference=reference,
                status="pending",
                fails=account.bank_account == "fails",
                created_at=now,
                updated_at=now,
            )
        )
        return payout_id

    def payout_status(
        self, conn: Connection | None, account_id: str, payout_id: str, *, now: datetime
    ) -> PayoutStatus:
        conn = _here(conn)
        row = conn.execute(select(_payouts).where(_payouts.c.id == payout_id)).one()
        status: PayoutState = row.status
        if status in ("pending", "in_transit"):
            elapsed = (now - as_utc(row.created_at)).total_seconds()
            if elapsed >= 2 * self.step_seconds:
                status = "failed" if row.fails else "paid"
            elif elapsed >= self.step_seconds:
                status = "in_transit"
            if status != row.status:
                conn.execute(
                    update(_payouts)
                    .where(_payouts.c.id == payout_id)
                    .values(status=status, updated_at=now)
                )
        return PayoutStatus(
            status=status, failure_reason=FAILURE_REASON if status == "failed" else None
        )


def _here(conn: Connection | None) -> Connection:
    """The caller's transaction, which the sandbox keeps its state in."""
    if conn is None:
        raise InvariantError("the sandbox processor is called inside a transaction")
    return conn


def _account(conn: Connection, account_id: str) -> Row[Any]:
    return conn.execute(select(_acct).where(_acct.c.id == account_id)).one()


# --- the pages' side (routes/sandbox_connect.py) -------------------------------------------


@attrs.frozen(kw_only=True)
class OpenLink:
    """A usable link and the account it opens."""

    kind: str
    account: Row[Any]
    expires_at: datetime


def open_link(conn: Connection, token: str, *, kind: str, now: datetime) -> OpenLink | None:
    """The account behind an unexpired, unused link of ``kind``; ``None`` otherwise (an
    unknown, expired or used link look the same to whoever holds one)."""
    link = conn.execute(
        select(_links).where(_links.c.token_hash == hash_key(token), _links.c.kind == kind)
    ).first()
    if link is None or link.used_at is not None or as_utc(link.expires_at) <= now:
        return None
    return OpenLink(kind=kind, account=_account(conn, link.account_id), expires_at=link.expires_at)


def submit_onboarding(
    conn: Connection,
    token: str,
    *,
    legal_name: str | None,
    bank_account: str | None,
    tos_accepted: bool,
    complete: bool,
    now: datetime,
) -> dict[str, str] | None:
    """What a human sent from the onboarding page.  ``complete`` ("Complete onboarding")
    needs every field and leaves nothing due; otherwise ("Finish later") what was given is
    kept and the rest, with identity verification, stays due.  Returns the problems per
    field (nothing written, the link still usable), or ``None`` when done: the link is
    used up.  Raises ``not_found`` when the link is not usable (expired, used, unknown)."""
    errors: dict[str, str] = {}
    if bank_account is not None and bank_account not in BANK_ACCOUNTS:
        errors["bank_account"] = "Choose one of the listed bank accounts."
    if complete:
        if not legal_name:
            errors["legal_name"] = "Enter the account holder's legal name."
        if bank_account is None:
            errors["bank_account"] = "Choose a bank account for payouts."
        if not tos_accepted:
            errors["tos"] = "Accept the sandbox terms to complete onboarding."
    if errors:
        return errors
    account_id = conn.execute(
        update(_links)
        .where(
            _links.c.token_hash == hash_key(token),
            _links.c.kind == "onboarding",
            _links.c.used_at.is_(None),
            _links.c.expires_at > now,
        )
        .values(used_at=now)
        .returning(_links.c.account_id)
    ).scalar()
    if account_id is None:
        raise DomainError("not_found", "This onboarding link has expired or was used.")
    given = {
        "legal_name": bool(legal_name),
        "external_account": bank_account is not None,
        "tos_acceptance": tos_accepted,
    }
    due = [] if complete else [name for name in REQUIREMENTS if not given[name]] + [VERIFICATION]
    values: dict[str, Any] = {
        "details_submitted": complete,
        "payouts_enabled": complete,
        "requirements_due": due,
        "tos_accepted": tos_accepted,
        "updated_at": now,
    }
    if legal_name:
        values["legal_name"] = legal_name
    if bank_account is not None:
        values["bank_account"] = bank_account
    conn.execute(update(_acct).where(_acct.c.id == account_id).values(**values))
    return None


def payouts_of(conn: Connection, account_id: str, *, limit: int = 20) -> list[Row[Any]]:
    """The account's latest payouts, newest first (its dashboard page)."""
    return list(
        conn.execute(
            select(_payouts)
            .where(_payouts.c.account_id == account_id)
            .order_by(_payouts.c.created_at.desc(), _payouts.c.id.desc())
            .limit(limit)
        )
    )

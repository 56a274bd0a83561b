"""The seller's payout account (Connect): onboard, sync, login, auto payout settings.

The service keeps one ``payout_accounts`` row per seller beside the processor's account;
its readiness flags are copied from the processor by :func:`sync` only, and
``sellers.payouts_enabled`` with them, so what a seller sees changes when it asks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select, update

from svc import ConnectAccount
from svc.money import from_micros

from ...ids import new_id
from ...store import tables as t
from ...timeutil import as_utc
from ..errors import DomainError
from .processor import AccountStatus, Link, PayoutProcessor

__all__ = [
    "account_of",
    "apply_status",
    "connect_model",
    "effective_minimum",
    "login",
    "onboard",
    "sync",
    "update_auto_payout",
]

_pa = t.payout_accounts


def account_of(conn: Connection, seller_id: str) -> Row[Any] | None:
    return conn.execute(select(_pa).where(_pa.c.seller_id == seller_id)).first()


def onboard(
    conn: Connection,
    seller: Row[Any],
    processor: PayoutProcessor,
    *,
    country: str,
    type: str | None,
    now: datetime,
) -> tuple[Row[Any], Link]:
    """The seller's payout account (opened on the first call) and a fresh onboarding link.
    The country and type of an open account cannot change."""
    row = account_of(conn, seller.id)
    if row is None:
        kind = type or "express"
        account_id = processor.create_account(
            conn,
            seller_id=seller.id,
            environment=seller.environment,
            country=country,
            type=kind,
            now=now,
        )
        row = conn.execute(
            insert(_pa)
            .values(
                id=new_id("pa"),
                seller_id=seller.id,
                environment=seller.environment,
                processor=processor.name,
                processor_account_id=account_id,
                type=kind,
                country=country,
                details_submitted=False,
                payouts_enabled=False,
                requirements_due=[],
                auto_payout=True,
                created_at=now,
                updated_at=now,
            )
            .returning(*_pa.c)
        ).one()
    elif row.country != country or (type is not None and row.type != type):
        raise DomainError(
            "conflict",
            f"The payout account was opened for country {row.country} ({row.type}); "
            "they cannot change.",
            details={"country": row.country, "type": row.type},
        )
    return row, processor.onboarding_link(conn, row.processor_account_id, now=now)


def _require(conn: Connection, seller: Row[Any]) -> Row[Any]:
    row = account_of(conn, seller.id)
    if row is None:
        raise DomainError(
            "conflict",
            "The seller has no payout account yet: start with connect/onboard "
            '({"country": "US"}) and hand its onboard_url to a human.',
        )
    return row


def sync(
    conn: Connection, seller: Row[Any], processor: PayoutProcessor, *, now: datetime
) -> Row[Any]:
    """Read the account's readiness from the processor; ``sellers.payouts_enabled`` follows."""
    row = _require(conn, seller)
    status = processor.account_status(conn, row.processor_account_id)
    apply_status(conn, row, status, synced_at=now, now=now)
    return _require(conn, seller)


def apply_status(
    conn: Connection, row: Row[Any], status: AccountStatus, *, synced_at: datetime, now: datetime
) -> None:
    """The account's readiness as the processor reported it (a sync, or its event);
    ``sellers.payouts_enabled`` follows, and with it auto payout."""
    conn.execute(
        update(_pa)
        .where(_pa.c.id == row.id)
        .values(
            details_submitted=status.details_submitted,
            payouts_enabled=status.payouts_enabled,
            requirements_due=list(status.requirements_due),
            synced_at=synced_at,
            updated_at=now,
        )
    )
    conn.execute(
        update(t.sellers)
        .where(t.sellers.c.id == row.seller_id)
        .values(payouts_enabled=status.payouts_enabled)
    )


def login(conn: Connection, seller: Row[Any], processor: PayoutProcessor, *, now: datetime) -> Link:
    """A link to the payout account's dashboard, once a human has completed onboarding."""
    row = _require(conn, seller)
    if not row.details_submitted:
        raise DomainError(
            "conflict",
            "Onboarding is not complete: hand the onboard_url from connect/onboard to a "
            "human, then connect/sync; the login link is for onboarded accounts.",
            details={"requirements_due": list(row.requirements_due or [])},
        )
    return processor.login_link(conn, row.processor_account_id, now=now)


def update_auto_payout(
    conn: Connection,
    seller: Row[Any],
    *,
    auto_payout: bool | None,
    minimum_micros: int | None,
    reset_minimum: bool,
    now: datetime,
) -> Row[Any]:
    row = _require(conn, seller)
    values: dict[str, Any] = {"updated_at": now}
    if auto_payout is not None:
        values["auto_payout"] = auto_payout
    if minimum_micros is not None:
        values["auto_payout_minimum_micros"] = minimum_micros
    elif reset_minimum:
        values["auto_payout_minimum_micros"] = None
    conn.execute(update(_pa).where(_pa.c.id == row.id).values(**values))
    return _require(conn, seller)


def effective_minimum(row: Row[Any] | None, default_micros: int) -> int | None:
    """The balance auto payout waits for; ``None``: auto payout is off for the seller."""
    if row is None or not row.auto_payout:
        return None
    minimum = row.auto_payout_minimum_micros
    if minimum is None:
        minimum = default_micros
    return int(minimum) if minimum > 0 else None


def connect_model(seller: Row[Any], row: Row[Any] | None, default_micros: int) -> ConnectAccount:
    if row is None:
        return ConnectAccount(
            seller_id=seller.id,
            environment=seller.environment,
            status="not_started",
            auto_payout_minimum=None,
        )
    minimum = effective_minimum(row, default_micros)
    return ConnectAccount(
        seller_id=seller.id,
        environment=seller.environment,
        status="enabled" if row.payouts_enabled else "onboarding",
        payouts_enabled=row.payouts_enabled,
        details_submitted=row.details_submitted,
        requirements_due=list(row.requirements_due or []),
        account_id=row.processor_account_id,
        type=row.type,
        country=row.country,
        auto_payout=row.auto_payout,
        auto_payout_minimum=None if minimum is None else from_micros(minimum),
        synced_at=None if row.synced_at is None else as_utc(row.synced_at),
    )

"""Approvals: a wallet key's payment over its policy's line waits for a person.

A payment strictly above the policy's ``approval_above``, or to one of its
``approval_hosts``, is not paid: :func:`request` holds its amount on the key as the
metered hold does (``wallets.charge`` counts it against the allowance and budget; a
pending ledger transfer reserves it from the key's balance), writes an ``approvals`` row
and ``approval.requested``, and the route answers 202.  A person opens the one-time
link (:func:`open_link`) and approves or declines (:func:`decide`).  The agent repeats
its request with the same ``Idempotency-Key``: the route reads the approval first
(:func:`resume`), so the 202 is never the key's stored answer.  An approved repeat pays
once: in the transaction that charges the payment the hold is released (:func:`use`),
so the amount is counted once and never free in between.  A declined or expired
approval releases the hold and answers 402 from then on.

The link's token is an HMAC of the approval's id under a server secret: only its
SHA-256 is stored, and the service can show the link again to the key that asked.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta
from typing import Any

import attrs
from sqlalchemy import Connection, Row, select, update

from svc import Approval, ApprovalList
from svc.money import format_micros, from_micros

from ..context import APPROVAL_CSRF, APPROVAL_LINKS, ServerContext
from ..ids import hash_key, new_id
from ..store import Database
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger, paging, wallets
from .errors import DomainError, PaymentRefused
from .events import record_event
from .paging import PageRequest

__all__ = [
    "Ask",
    "csrf_token",
    "decide",
    "expire_due",
    "get_for_caller",
    "list_for_key",
    "model",
    "open_link",
    "release_outpriced",
    "request",
    "resume",
    "use",
    "used_by",
]

_a = t.approvals
_HOLD_KIND = "approval_hold"


@attrs.frozen(kw_only=True)
class Ask:
    """A request that would pay over the line: what the approval records of it."""

    route: str
    idempotency_key: str
    fingerprint: str
    amount: int
    rail: str
    #: ``pay-url``: the URL, its method and host; ``POST /pay``: the resource.
    url: str | None = None
    method: str | None = None
    host: str | None = None
    resource_id: str | None = None
    #: The ledger account the payment would credit (the hold's credit side).
    credit: tuple[str, str]
    request_id: str
    public_url: str


def _token(ctx: ServerContext, approval_id: str) -> str:
    key = ctx.secret(APPROVAL_LINKS).encode()
    return hmac.new(key, approval_id.encode(), hashlib.sha256).hexdigest()


def csrf_token(ctx: ServerContext, token: str) -> str:
    """The page's CSRF token: bound to the link's token by a server secret."""
    key = ctx.secret(APPROVAL_CSRF).encode()
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def approval_url(ctx: ServerContext, public_url: str, approval_id: str) -> str:
    return f"{public_url.rstrip('/')}/approvals/{_token(ctx, approval_id)}"


def request(
    conn: Connection, ctx: ServerContext, *, key_id: str, ask: Ask, now: datetime
) -> Approval:
    """Hold ``ask.amount`` on the key under its policy and record the approval (the
    policy's and balance's refusals raise, as a payment's would: nothing is held)."""
    key = wallets.charge(conn, key_id, ask.amount, rail=ask.rail, host=ask.host, now=now)
    debit, credit = ledger.find_accounts(
        conn,
        environment=key.environment,
        named=[(ledger.WALLET_KEY, key.id), ask.credit],
        now=now,
    )
    approval_id = new_id("appr")
    try:
        transfer_id = ledger.reserve(
            conn,
            environment=key.environment,
            debit=debit,
            credit=credit,
            amount=ask.amount,
            kind=_HOLD_KIND,
            now=now,
            wallet_key_id=key.id,
            reference=approval_id,
        )
    except ledger.InsufficientFunds:
        raise wallets.insufficient_funds(conn, key, ask.amount) from None
    ttl = wallets.PolicyValues.of(key).ttl_seconds()
    conn.execute(
        _a.insert().values(
            id=approval_id,
            environment=key.environment,
            owner_id=key.owner_id,
            wallet_key_id=key.id,
            amount_micros=ask.amount,
            method=ask.method,
            url=ask.url,
            host=ask.host,
            resource_id=ask.resource_id,
            route=ask.route,
            idempotency_key=ask.idempotency_key,
            request_hash=ask.fingerprint,
            status="pending",
            token_hash=hash_key(_token(ctx, approval_id)),
            transfer_id=transfer_id,
            expires_at=now + timedelta(seconds=ttl),
            request_id=ask.request_id,
            created_at=now,
        )
    )
    row = _get(conn, approval_id)
    shown = model(ctx, row, ask.public_url, now)
    record_event(
        conn,
        owner_id=key.owner_id,
        environment=key.environment,
        type="approval.requested",
        data={
            "approval_id": approval_id,
            "wallet_key_id": key.id,
            "amount": format_micros(ask.amount),
            "url": ask.url,
            "resource_id": ask.resource_id,
            "expires_at": as_utc(row.expires_at).isoformat(),
            "environment": key.environment,
        },
        now=now,
    )
    return shown


def resume(
    conn: Connection,
    ctx: ServerContext,
    *,
    key_id: str,
    route: str,
    idempotency_key: str,
    fingerprint: str,
    public_url: str,
    now: datetime,
) -> Approval | DomainError | Row[Any] | None:
    """What a repeat of the request with this ``Idempotency-Key`` meets: ``None`` (no
    approval, or one used: the key's own record answers), the pending approval (202
    again), its 402 (declined or expired), or the approved row to pay with."""
    row = conn.execute(
        _lock(
            select(_a).where(
                _a.c.wallet_key_id == key_id,
                _a.c.route == route,
                _a.c.idempotency_key == idempotency_key,
            ),
            conn,
        )
    ).first()
    if row is None or row.status == "used":
        return None
    if row.request_hash != fingerprint:
        return DomainError(
            "idempotency_key_reused",
            "This Idempotency-Key asked for another payment's approval; use a new key.",
            details={"approval_id": row.id},
        )
    if row.status in ("pending", "approved") and as_utc(row.expires_at) <= now:
        row = _close(conn, row, "expired", now)
    if row.status == "pending":
        return model(ctx, row, public_url, now)
    if row.status == "approved":
        return row
    return refusal(row)


def refusal(row: Row[Any]) -> DomainError:
    """The 402 of a declined or expired approval."""
    if row.status == "declined":
        return PaymentRefused(
            "approval_declined",
            f"A person declined this payment of {format_micros(row.amount_micros)} "
            f"(approval {row.id}); nothing was paid.",
            details={"approval_id": row.id},
        )
    return PaymentRefused(
        "approval_expired",
        f"The approval {row.id} expired before it was decided or used; nothing was paid. "
        "Send the request with a new Idempotency-Key to ask again.",
        details={"approval_id": row.id},
    )


def use(
    conn: Connection, approval_id: str, amount: int, *, receipt_id: str | None, now: datetime
) -> None:
    """The approved payment is being charged in this transaction: release the hold first
    (the charge that follows counts it again, under the key's lock it already holds), and
    mark the approval used; a price above the approved amount is refused.  The
    approval's row is locked first, then the key's: the order a decision takes too."""
    row = conn.execute(_lock(select(_a).where(_a.c.id == approval_id), conn)).one()
    if row.status != "approved":
        raise (
            refusal(row)
            if row.status in ("declined", "expired")
            else DomainError("conflict", f"The approval {approval_id} was used already.")
        )
    if amount > row.amount_micros:
        raise PaymentRefused(
            "approval_amount_exceeded",
            f"The price is now {format_micros(amount)}, above the "
            f"{format_micros(row.amount_micros)} a person approved; nothing was paid.",
            details={
                "approval_id": row.id,
                "approved": format_micros(row.amount_micros),
                "amount": format_micros(amount),
            },
        )
    _release(conn, row, now)
    conn.execute(
        update(_a)
        .where(_a.c.id == approval_id)
        .values(status="used", receipt_id=receipt_id, transfer_id=None)
    )


def release_outpriced(conn: Connection, refused: DomainError, now: datetime) -> None:
    """After :func:`use` refused an approved payment whose price rose above the approved
    amount (and its transaction rolled back): that approval can never pay, as the refusal
    is its key's stored answer, so its hold goes back to the key now rather than when it
    expires.  It reads ``approved`` until then.  Any other refusal: nothing to do."""
    if refused.code != "approval_amount_exceeded":
        return
    approval_id = (refused.details or {}).get("approval_id")
    row = conn.execute(_lock(select(_a).where(_a.c.id == approval_id), conn)).first()
    if row is None or row.status != "approved" or row.transfer_id is None:
        return
    _release(conn, row, now)
    conn.execute(update(_a).where(_a.c.id == row.id).values(transfer_id=None))


def used_by(conn: Connection, approval_id: str, receipt_id: str) -> None:
    """The receipt the approved payment made (``POST /pay``: known once it is paid)."""
    conn.execute(update(_a).where(_a.c.id == approval_id).values(receipt_id=receipt_id))


def open_link(conn: Connection, token: str, now: datetime) -> Row[Any] | None:
    """The approval a link's token opens, if it still waits for a person."""
    row = conn.execute(select(_a).where(_a.c.token_hash == hash_key(token))).first()
    if row is None or row.status != "pending" or as_utc(row.expires_at) <= now:
        return None
    return row


def decided(conn: Connection, token: str) -> Row[Any] | None:
    """The approval a link's token names, whatever its status (the page says it was
    decided already)."""
    return conn.execute(select(_a).where(_a.c.token_hash == hash_key(token))).first()


def decide(conn: Connection, token: str, approve: bool, now: datetime) -> Row[Any] | None:
    """The person's decision: the first one wins (a conditional update); ``None`` when
    the link is unknown, expired or decided already.  Declining releases the hold."""
    row = conn.execute(_lock(select(_a).where(_a.c.token_hash == hash_key(token)), conn)).first()
    if row is None or row.status != "pending" or as_utc(row.expires_at) <= now:
        return None
    return _close(conn, row, "approved" if approve else "declined", now)


def _close(conn: Connection, row: Row[Any], status: str, now: datetime) -> Row[Any]:
    """Move a pending (or approved) approval to ``status``, releasing the hold unless it
    was approved, and record ``approval.decided``."""
    if status != "approved":
        _release(conn, row, now)
    conn.execute(
        update(_a)
        .where(_a.c.id == row.id)
        .values(
            status=status,
            decided_at=row.decided_at if row.status == "approved" else now,
            transfer_id=row.transfer_id if status == "approved" else None,
        )
    )
    record_event(
        conn,
        owner_id=row.owner_id,
        environment=row.environment,
        type="approval.decided",
        data={
            "approval_id": row.id,
            "wallet_key_id": row.wallet_key_id,
            "decision": status,
            "amount": format_micros(row.amount_micros),
            "environment": row.environment,
        },
        now=now,
    )
    return _get(conn, row.id)


def _release(conn: Connection, row: Row[Any], now: datetime) -> None:
    """Give the policy back the held amount and void the hold (the key's lock first, as
    every payment takes it)."""
    if row.transfer_id is None:
        return
    wallets.refund_charge(conn, row.wallet_key_id, row.amount_micros, charged_at=row.created_at)
    ledger.void(conn, row.transfer_id, now)


def expire_due(db: Database, *, now: datetime) -> int:
    """The housekeeping sweep: expire every pending or approved approval past its
    ``expires_at`` (an approved one the agent never resumed), releasing its hold and
    recording ``approval.decided`` (expired); returns how many."""
    with db.read() as conn:
        ids = list(
            conn.execute(
                select(_a.c.id).where(
                    _a.c.status.in_(("pending", "approved")), _a.c.expires_at <= now
                )
            ).scalars()
        )
    expired = 0
    for approval_id in ids:
        with db.write() as conn:
            row = conn.execute(_lock(select(_a).where(_a.c.id == approval_id), conn)).one()
            if row.status in ("pending", "approved") and as_utc(row.expires_at) <= now:
                _close(conn, row, "expired", now)
                expired += 1
    return expired


# --- reading ------------------------------------------------------------------------------


def get_for_caller(
    conn: Connection,
    ctx: ServerContext,
    approval_id: str,
    *,
    environment: str,
    wallet_key_id: str | None,
    owner_id: str | None,
    public_url: str,
    now: datetime,
) -> Approval:
    """``GET /spend/approvals/{id}``: the key's own approval, or the owner's key's."""
    where = [_a.c.id == approval_id, _a.c.environment == environment]
    if wallet_key_id is not None:
        where.append(_a.c.wallet_key_id == wallet_key_id)
    else:
        where.append(_a.c.owner_id == owner_id)
    row = conn.execute(select(_a).where(*where)).first()
    if row is None:
        raise DomainError("not_found", f"No approval {approval_id} in {environment}.")
    return model(ctx, row, public_url, now)


def list_for_key(
    conn: Connection,
    ctx: ServerContext,
    request: PageRequest,
    *,
    wallet_key_id: str,
    environment: str,
    public_url: str,
    now: datetime,
) -> ApprovalList:
    """The key's approvals, newest first (paged)."""
    page = paging.page(
        conn,
        request,
        select(_a),
        table=_a,
        scope=[_a.c.wallet_key_id == wallet_key_id, _a.c.environment == environment],
        order="desc",
    )
    shown = [model(ctx, r, public_url, now) for r in page.rows]
    return ApprovalList(data=shown, has_more=page.has_more)


def model(ctx: ServerContext, row: Row[Any], public_url: str, now: datetime) -> Approval:
    """The approval as a reader sees it at ``now``: one past its expiry reads ``expired``
    (decided when it expired) before housekeeping's sweep closes it and frees its hold,
    so nobody is sent to a page that can no longer approve it."""
    status, decided_at = row.status, row.decided_at
    if status in ("pending", "approved") and as_utc(row.expires_at) <= now:
        status, decided_at = "expired", row.expires_at
    pending = status == "pending"
    return Approval(
        id=row.id,
        status=status,
        code="approval_required" if pending else None,
        amount=from_micros(row.amount_micros),
        wallet_key_id=row.wallet_key_id,
        environment=row.environment,
        url=row.url,
        method=row.method,
        resource_id=row.resource_id,
        approval_url=approval_url(ctx, public_url, row.id) if pending else None,
        expires_at=as_utc(row.expires_at),
        created_at=as_utc(row.created_at),
        decided_at=None if decided_at is None else as_utc(decided_at),
        receipt_id=row.receipt_id,
    )


def _get(conn: Connection, approval_id: str) -> Row[Any]:
    return conn.execute(select(_a).where(_a.c.id == approval_id)).one()


def _lock(query: Any, conn: Connection) -> Any:
    return query.with_for_update() if conn.dialect.name == "postgresql" else query

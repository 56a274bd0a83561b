"""Wallet keys (owner JWT): mint, list, read, change policy, fund, refund, revoke."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs
from sqlalchemy import select, update

from svc import WalletKey, WalletKeyCreated, WalletKeyList
from svc.bodies import CreateWalletKey, UpdateWalletKey, WalletKeyAmount, WalletKeyPolicy
from svc.money import format_micros, to_micros

from ..domain import ledger, wallets
from ..domain.events import record_event
from ..invariant import InvariantError
from ..store import tables as t
from ..web import paging
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError, invalid
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields

__all__ = ["ENDPOINTS"]

_LIMITS = ("allowance", "max_per_tx", "budget", "approval_above")
_LISTS = ("allowed_hosts", "allowed_rails", "approval_hosts")


def _policy(
    call: Call, given: WalletKeyPolicy | None, base: wallets.PolicyValues
) -> wallets.PolicyValues:
    """The policy over ``base``: a field left out keeps its value, ``null`` clears it
    (the typed body reads both as ``None``; the raw body tells them apart)."""
    if given is None:
        return base
    sent = Fields.rules(call.body).nested("policy")
    if sent is None:
        raise InvariantError("a policy read by its shape is an object")
    changes: dict[str, Any] = {}
    if given.period is not None:
        changes["period"] = given.period
    for name in (*_LIMITS, *_LISTS, "approval_ttl_seconds"):
        value = getattr(given, name)
        if value is not None:
            changes[name] = _stored(name, value)
        elif sent.is_null(name):
            changes[name] = None
    return attrs.evolve(base, **changes)


def _stored(name: str, value: Any) -> Any:
    """A policy field's value as stored: amounts in micro-units, the TTL checked."""
    if name in _LIMITS:
        amount: Decimal = value
        return to_micros(amount)
    return _ttl(value) if name == "approval_ttl_seconds" else value


def _ttl(seconds: int) -> int:
    """``approval_ttl_seconds`` within its bounds, or the 422 that says them."""
    low, high = wallets.APPROVAL_TTL_BOUNDS
    if not low <= seconds <= high:
        field, message = "policy.approval_ttl_seconds", f"must be {low} to {high} seconds"
        raise invalid([{"field": field, "message": message}])
    return seconds


def create(call: Call) -> Reply:
    """Mint a wallet key (``svc_vw_*``, shown once) with a spend policy."""
    owner = call.caller
    b = call.input(CreateWalletKey)
    policy = _policy(call, b.policy, wallets.PolicyValues())
    row, key = wallets.create_wallet_key(
        call.conn,
        owner_id=owner.owner_id,
        environment=call.environment,
        name=b.name,
        policy=policy,
        now=call.now,
    )
    model = wallets.wallet_key_model(call.conn, row)
    return Reply(WalletKeyCreated(**attrs.asdict(model, recurse=False), key=key), 201, secret=True)


@paged
def list_all(call: Call, request: PageRequest) -> Reply:
    """The owner's wallet keys in this environment, oldest first, revoked ones included
    (paged)."""
    owner = call.caller
    w = t.wallet_keys
    page = paging.page(
        call.conn,
        request,
        select(w),
        table=w,
        scope=[w.c.owner_id == owner.owner_id, w.c.environment == call.environment],
        order="asc",
    )
    data = [wallets.wallet_key_model(call.conn, r) for r in page.rows]
    return Reply(WalletKeyList(data=data, has_more=page.has_more))


def get_one(call: Call) -> Reply:
    row = _own(call)
    return Reply(wallets.wallet_key_model(call.conn, row))


def patch(call: Call) -> Reply:
    """Rename, or change the policy (fields left out keep their values; null clears)."""
    row = _own(call)
    row = wallets.lock_wallet_key(call.conn, row.id)
    b = call.input(UpdateWalletKey)
    values = _policy(call, b.policy, wallets.PolicyValues.of(row)).columns()
    if b.name is not None:
        values["name"] = b.name
    w = t.wallet_keys
    call.conn.execute(update(w).where(w.c.id == row.id).values(**values))
    return Reply(wallets.wallet_key_model(call.conn, wallets.get_wallet_key(call.conn, row.id)))


def fund(call: Call) -> Reply:
    """Add money: sandbox funding in test, the owner's account wallet in live."""
    row = _own(call)
    amount = _amount(call)
    row = wallets.lock_wallet_key(call.conn, row.id)
    if row.status != "active":
        raise ApiError("wallet_key_revoked", "A revoked wallet key cannot be funded.")
    env = row.environment
    if env == "test":
        source_kind, source_ref, source = ledger.SANDBOX_FUNDING, ledger.PLATFORM, "sandbox"
    else:
        source_kind, source_ref, source = ledger.OWNER_WALLET, row.owner_id, "account_wallet"
    source_acct = ledger.ensure_account(
        call.conn, environment=env, kind=source_kind, ref_id=source_ref, now=call.now
    )
    _move(
        call,
        row,
        debit=source_acct,
        credit=wallets.wallet_account(call.conn, row),
        amount=amount,
        kind="funding",
        event="funding.paid",
        shortfall="The account wallet has {available} available; recycle seller balance "
        "into it first (POST /sellers/:id/recycle).",
        extra={"source": source},
    )
    model = wallets.wallet_key_model(call.conn, row)
    return Reply(model)


def refund(call: Call) -> Reply:
    """Move money from the wallet key back to the owner's account wallet."""
    row = _own(call)
    amount = _amount(call)
    row = wallets.lock_wallet_key(call.conn, row.id)
    _return_to_owner(call, row, amount, reason="refund")
    return Reply(wallets.wallet_key_model(call.conn, row))


def revoke(call: Call) -> Reply:
    """Stop the key for good; its available balance goes back to the account wallet."""
    row = _own(call)
    row = wallets.lock_wallet_key(call.conn, row.id)
    if row.status == "revoked":
        return Reply(wallets.wallet_key_model(call.conn, row))
    w = t.wallet_keys
    call.conn.execute(
        update(w).where(w.c.id == row.id).values(status="revoked", revoked_at=call.now)
    )
    available = ledger.available_micros(call.conn, wallets.wallet_account(call.conn, row))
    if available > 0:
        _return_to_owner(call, row, available, reason="revoke")
    record_event(
        call.conn,
        owner_id=row.owner_id,
        environment=row.environment,
        type="vw.revoked",
        data={
            "wallet_key_id": row.id,
            "returned_amount": format_micros(available),
            "environment": row.environment,
        },
        now=call.now,
    )
    return Reply(wallets.wallet_key_model(call.conn, wallets.get_wallet_key(call.conn, row.id)))


def _return_to_owner(call: Call, row: Any, amount: int, *, reason: str) -> None:
    owner_acct = ledger.ensure_account(
        call.conn,
        environment=row.environment,
        kind=ledger.OWNER_WALLET,
        ref_id=row.owner_id,
        now=call.now,
    )
    _move(
        call,
        row,
        debit=wallets.wallet_account(call.conn, row),
        credit=owner_acct,
        amount=amount,
        kind="refund",
        event="funding.refunded",
        shortfall="The wallet key has only {available} available to refund.",
        extra={"reason": reason},
    )


def _move(
    call: Call,
    row: Any,
    *,
    debit: str,
    credit: str,
    amount: int,
    kind: str,
    event: str,
    shortfall: str,
    extra: dict[str, Any],
) -> None:
    """One transfer into or out of a wallet key, and its ``funding.*`` event."""
    env = row.environment
    ledger.lock_accounts(call.conn, [debit, credit])
    try:
        transfer = ledger.transfer(
            call.conn,
            environment=env,
            debit=debit,
            credit=credit,
            amount=amount,
            kind=kind,
            now=call.now,
            wallet_key_id=row.id,
        )
    except ledger.InsufficientFunds as exc:
        available = format_micros(exc.available)
        raise ApiError(
            "insufficient_funds",
            shortfall.format(available=available),
            details={"available": available},
        ) from None
    wallet_acct = wallets.wallet_account(call.conn, row)
    record_event(
        call.conn,
        owner_id=row.owner_id,
        environment=env,
        type=event,
        data={
            "wallet_key_id": row.id,
            "amount": format_micros(amount),
            "balance": format_micros(ledger.available_micros(call.conn, wallet_acct)),
            **extra,
            "transfer_id": transfer,
            "environment": env,
        },
        now=call.now,
    )


def _amount(call: Call) -> int:
    return to_micros(call.input(WalletKeyAmount).amount)


def _own(call: Call) -> Any:
    return call.owned(wallets.find_owned, "key_id")


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/wallet-keys",
        handler=create,
        auth=Role.OWNER,
        idempotency="optional",
        body=CreateWalletKey,
        sdk=Sdk(
            "wallet_keys.create",
            "name: str | None = None, *, allowance: Amount | None = None, "
            "max_per_tx: Amount | None = None, budget: Amount | None = None, "
            "period: Period | None = None, allowed_hosts: Sequence[str] | None = None, "
            "allowed_rails: Sequence[str] | None = None, "
            "approval_above: Amount | None = None, "
            "approval_hosts: Sequence[str] | None = None, "
            "approval_ttl_seconds: int | None = None",
            doc="""Mint a key with a policy; limits left out (or ``None``) are unlimited.

            ``allowance`` may be spent per ``period`` (``day``, ``week``, ``month`` or
            ``none``), ``max_per_tx`` per payment and ``budget`` in total.  Keep ``key``: it is
            never shown again.  A new key has no money until :meth:`fund`.  A payment
            above ``approval_above``, or to one of ``approval_hosts``, waits for a person
            (:class:`~svc.ApprovalRequired`, docs/approvals.md) for up to
            ``approval_ttl_seconds`` (default 900).
            """,
            build="create_wallet_key_body",
        ),
        contract=Contract(response=WalletKeyCreated, status=201),
    ),
    Endpoint(
        method="GET",
        path="/wallet-keys",
        handler=list_all,
        auth=Role.OWNER,
        sdk=Sdk(
            "wallet_keys.list",
            doc="""The owner's wallet keys in this environment, oldest first, revoked ones
            included.""",
            all_doc="""Every wallet key of the owner, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=WalletKeyList),
    ),
    Endpoint(
        method="GET",
        path="/wallet-keys/{key_id}",
        handler=get_one,
        auth=Role.OWNER,
        sdk=Sdk(
            "wallet_keys.get",
            "wallet_key_id: str",
            path_names={"key_id": "wallet_key_id"},
        ),
        contract=Contract(response=WalletKey),
    ),
    Endpoint(
        method="PATCH",
        path="/wallet-keys/{key_id}",
        handler=patch,
        auth=Role.OWNER,
        idempotency="optional",
        body=UpdateWalletKey,
        sdk=Sdk(
            "wallet_keys.update",
            "wallet_key_id: str, *, name: str | NotGiven = NOT_GIVEN, "
            "allowance: Amount | NotGiven | None = NOT_GIVEN, "
            "max_per_tx: Amount | NotGiven | None = NOT_GIVEN, "
            "budget: Amount | NotGiven | None = NOT_GIVEN, "
            "period: Period | NotGiven = NOT_GIVEN, "
            "allowed_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN, "
            "allowed_rails: Sequence[str] | NotGiven | None = NOT_GIVEN, "
            "approval_above: Amount | NotGiven | None = NOT_GIVEN, "
            "approval_hosts: Sequence[str] | NotGiven | None = NOT_GIVEN, "
            "approval_ttl_seconds: int | NotGiven | None = NOT_GIVEN",
            doc="""Change the fields given.  ``None`` removes that limit; a field left out is kept.

            ``period="none"`` stops the allowance from resetting.
            """,
            build="update_wallet_key_body",
            path_names={"key_id": "wallet_key_id"},
        ),
        contract=Contract(response=WalletKey),
    ),
    Endpoint(
        method="POST",
        path="/wallet-keys/{key_id}/fund",
        handler=fund,
        auth=Role.OWNER,
        idempotency="optional",
        body=WalletKeyAmount,
        sdk=Sdk(
            "wallet_keys.fund",
            "wallet_key_id: str, amount: Amount",
            doc="""Add prepaid balance from the owner's account wallet (Test: instant sandbox
            money).""",
            path_names={"key_id": "wallet_key_id"},
        ),
        contract=Contract(response=WalletKey, errors=("insufficient_funds", "wallet_key_revoked")),
    ),
    Endpoint(
        method="POST",
        path="/wallet-keys/{key_id}/refund",
        handler=refund,
        auth=Role.OWNER,
        idempotency="optional",
        body=WalletKeyAmount,
        sdk=Sdk(
            "wallet_keys.refund",
            "wallet_key_id: str, amount: Amount",
            doc="""Move unspent balance back to the owner's account wallet.""",
            path_names={"key_id": "wallet_key_id"},
        ),
        contract=Contract(response=WalletKey, errors=("insufficient_funds",)),
    ),
    Endpoint(
        method="POST",
        path="/wallet-keys/{key_id}/revoke",
        handler=revoke,
        auth=Role.OWNER,
        idempotency="optional",
        sdk=Sdk(
            "wallet_keys.revoke",
            "wallet_key_id: str",
            doc="""Stop the key for good; every later call with it is refused.""",
            path_names={"key_id": "wallet_key_id"},
        ),
        contract=Contract(response=WalletKey),
    ),
]

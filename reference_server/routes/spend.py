"""Agent routes (wallet key): balance, ``POST /pay`` and handle resolution."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import attrs
from sqlalchemy import select

from svc import Approval, HandleResolution, PayResult, SpendBalance
from svc.bodies import Pay
from svc.money import to_micros

from .. import receipt_tokens
from ..domain import approvals, handles, ledger, metered, payments, wallets
from ..domain.errors import DomainError, PaymentRefused
from ..invariant import InvariantError
from ..store import tables as t
from ..web.auth import Principal, Role
from ..web.endpoint import Call, Contract, Endpoint, Grouped
from ..web.errors import ApiError
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import checked

__all__ = ["ENDPOINTS"]


def balance(call: Call) -> Reply:
    """Prepaid balance and what the policy still allows (remaining allowance, next reset)."""
    agent = call.caller
    row = wallets.get_wallet_key(call.conn, agent.subject_id or "")
    return Reply(wallets.spend_balance_model(call.conn, row, call.now))


def _checked_pay(call: Call) -> tuple[Principal, Pay]:
    """The payer and the body (whose fields ``Pay`` itself checks against each other)."""
    agent = call.caller
    if agent.subject_id is None:
        raise InvariantError("expected agent.subject_id is not None")
    return agent, call.input(Pay)


def pay(call: Call) -> Reply:
    """Pay an in-service resource (``resource_id``) or a handle (``destination``, ``amount``).

    A fixed-price resource over the key's approval line answers 202 with an Approval
    (nothing paid, the amount held); the repeat with the same ``Idempotency-Key`` pays
    once a person approved it (docs/approvals.md)."""
    agent, b = _checked_pay(call)
    resource_id, destination, amount = b.resource_id, b.destination, b.amount
    if agent.subject_id is None:
        raise InvariantError("expected agent.subject_id is not None")
    resource = None
    answered: list[Reply] = []

    def answer_ahead(result: PayResult) -> None:
        answered.append(Reply(_signed(call, result, resource)))
        call.answer_ahead(answered[-1])

    # A savepoint: a refused payment leaves nothing behind but its payment.failed.  A paid
    # one leaves it open (no RELEASE): the commit ends it with the transaction, and the
    # wallet key's and the seller's rows, locked by then, wait one round trip less.  Any
    # other error rolls the whole transaction back, savepoint and all.
    savepoint = call.conn.begin_nested()
    try:
        if resource_id is not None:
            resource = _payable_resource(call, resource_id, agent)
            if resource.pricing == "metered":  # its maximum held, for its seller to capture
                result = metered.authorize(
                    call.conn,
                    wallet_key_id=agent.subject_id,
                    resource=resource,
                    request_id=call.request_id,
                    now=call.now,
                )
            else:
                approved = _approval(call, agent, resource)
                if isinstance(approved, Reply):
                    return approved  # it waits for a person, or a person refused it
                result = payments.pay_resource(
                    call.conn,
                    wallet_key_id=agent.subject_id,
                    resource=resource,
                    fee_bps=call.ctx.settings.platform_fee_bps,
                    request_id=call.request_id,
                    now=call.now,
                    answer_ahead=None if approved else answer_ahead,
                )
                if approved:
                    approvals.used_by(call.conn, approved, result.receipt_id)
        else:
            handle = _handle(call, checked(destination), agent.environment)
            result = payments.pay_handle(
                call.conn,
                wallet_key_id=agent.subject_id,
                handle=handle,
                amount=to_micros(checked(amount)),
                request_id=call.request_id,
                now=call.now,
            )
    except PaymentRefused as refused:
        savepoint.rollback()
        return _refused(
            call, agent, refused, resource, None if amount is None else to_micros(amount)
        )
    return answered[-1] if answered else Reply(_signed(call, result, resource))


def _approval(call: Call, agent: Principal, resource: Any) -> Reply | str | None:
    """The wallet key's approval line on a fixed-price resource (docs/approvals.md): a
    repeat of a request that waits for a person answers from its approval (202 again,
    or 402 once declined or expired); an approved one releases its hold for this payment
    and names its approval; a new payment over the line asks a person (202)."""
    key = call.key
    if key is None:
        raise InvariantError("POST /pay requires an Idempotency-Key")
    key_id = checked(agent.subject_id)
    resumed = approvals.resume(
        call.conn,
        call.ctx,
        key_id=key_id,
        route="pay",
        idempotency_key=key.key,
        fingerprint=key.fingerprint,
        public_url=call.public_url,
        now=call.now,
    )
    if isinstance(resumed, Approval):
        return Reply(resumed, 202, unsettled=True)
    if isinstance(resumed, PaymentRefused):
        return Reply.from_error(resumed)
    if isinstance(resumed, DomainError):
        raise resumed
    amount = int(resource.amount_micros)
    if resumed is not None:
        approvals.use(call.conn, resumed.id, amount, receipt_id=None, now=call.now)
        return str(resumed.id)
    policy = wallets.PolicyValues.of(wallets.get_wallet_key(call.conn, key_id))
    host = _resource_host(call, resource) if policy.approval_hosts else None
    if not policy.needs_approval(amount, host):
        return None
    ask = approvals.Ask(
        route="pay",
        idempotency_key=key.key,
        fingerprint=key.fingerprint,
        amount=amount,
        rail="rill",
        host=host,
        resource_id=resource.id,
        credit=(ledger.SELLER_BALANCE, resource.seller_id),
        request_id=call.request_id,
        public_url=call.public_url,
    )
    asked = approvals.request(call.conn, call.ctx, key_id=key_id, ask=ask, now=call.now)
    return Reply(asked, 202, unsettled=True)


def _resource_host(call: Call, resource: Any) -> str | None:
    """The host of the resource's own URL (its gate's upstream), if it has one: what
    ``approval_hosts`` names for ``POST /pay``."""
    r = t.resources
    upstream = call.conn.execute(select(r.c.upstream_url).where(r.c.id == resource.id)).scalar()
    return urlsplit(upstream).netloc.lower() or None if upstream else None


def _signed(call: Call, result: PayResult, resource: Any) -> PayResult:
    """The answer with its receipt token (none for a metered hold: nothing is proven
    until its seller captures it)."""
    if resource is not None and resource.pricing == "metered":
        return result
    token = receipt_tokens.issue(
        call.ctx,
        call.now,
        receipt_id=result.receipt_id,
        environment=call.caller.environment,
        amount=checked(result.amount),
        rail=result.rail,
        resource_id=result.resource_id,
        seller_id=None if resource is None else resource.seller_id,
        tx_hash=result.tx_hash,
    )
    return attrs.evolve(result, receipt_token=token)


def _refused(
    call: Call, agent: Principal, refused: PaymentRefused, resource: Any, amount: int | None
) -> Reply:
    """The refusal answered, its ``payment.failed`` recorded in the call's transaction
    (and an outpriced approval's hold released)."""
    approvals.release_outpriced(call.conn, refused, call.now)
    payments.record_refusal(
        call.conn,
        refused,
        owner_id=agent.owner_id,
        environment=agent.environment,
        wallet_key_id=checked(agent.subject_id),
        resource=resource,
        amount=amount,
        request_id=call.request_id,
        now=call.now,
    )
    return Reply.from_error(refused)


def pay_group(calls: list[Call]) -> list[Reply]:
    """``POST /pay`` for a group of one wallet key's concurrent requests, sharing one
    transaction (``Endpoint.group_commit``): resource payments are decided one by one,
    in order, against the key's policy and balance read once under its locks, and
    written together (``payments.pay_resources``); each answer is what :func:`pay`
    would have answered in that order, a refusal with its ``payment.failed``.  A group
    with a handle payment in it, or whose key is due a period reset, runs :func:`pay` on
    each in turn."""
    checked = [_checked_pay(call) for call in calls]
    agent = checked[0][0]
    key_id = agent.subject_id
    if key_id is None or any(b.resource_id is None or a.subject_id != key_id for a, b in checked):
        return [pay(call) for call in calls]
    if wallets.PolicyValues.of(wallets.get_wallet_key(calls[0].conn, key_id)).asks_approval():
        return [pay(call) for call in calls]  # a person may decide each: one by one
    resources: dict[str, Any] = {}
    purchases = []
    fee_ref = ledger.platform_shard()  # the group's, read with each resource
    for call, (_, b) in zip(calls, checked, strict=True):
        resource_id = b.resource_id
        if resource_id is None:
            raise InvariantError("a group of resource payments, checked above")
        if resource_id not in resources:
            resources[resource_id] = _payable_resource(call, resource_id, agent, fee_ref)
        if resources[resource_id].pricing == "metered":  # a hold, not a sale: one by one
            return [pay(call) for call in calls]
        purchases.append(
            payments.Purchase(
                resource=resources[resource_id], request_id=call.request_id, now=call.now
            )
        )
    conn = calls[0].conn
    results = payments.pay_resources(
        conn,
        wallet_key_id=key_id,
        purchases=purchases,
        fee_bps=calls[0].ctx.settings.platform_fee_bps,
        fee_ref=fee_ref,
    )
    if results is None:
        return [pay(call) for call in calls]
    replies = []
    for call, purchase, result in zip(calls, purchases, results, strict=True):
        if isinstance(result, PaymentRefused):
            replies.append(_refused(call, agent, result, purchase.resource, None))
        else:
            replies.append(Reply(_signed(call, result, purchase.resource)))
    return replies


def resolve(call: Call) -> Reply:
    """Check a transfer destination before paying it."""
    agent = call.caller
    row = _handle(call, call.params["destination"], agent.environment)
    return Reply(
        HandleResolution(
            destination="@" + row.handle, handle=row.handle, environment=row.environment
        )
    )


def _payable_resource(
    call: Call, resource_id: str, agent: Principal, fee_ref: str | None = None
) -> Any:
    """The resource as ``payments.pay_resources`` pays it (read with its seller's owner
    and the sale's accounts), or ``not_found`` / ``resource_inactive``."""
    environment = agent.environment
    row = payments.payable_resource(
        call.conn,
        resource_id,
        environment,
        wallet_key_id=agent.subject_id or "",
        fee_ref=fee_ref or ledger.platform_shard(),
    )
    if row is None:
        raise ApiError("not_found", f"No resource {resource_id} in {environment}.")
    if not row.active:
        raise ApiError(
            "resource_inactive", "This resource is deactivated; its seller no longer sells it."
        )
    return row


def _handle(call: Call, destination: str, environment: str) -> Any:
    name = handles.normalize_handle(destination)
    row = None if name is None else handles.find_handle(call.conn, name, environment=environment)
    if row is None:
        raise ApiError("not_found", f"No handle {destination[:40]!r} in {environment}.")
    return row


ENDPOINTS = [
    Endpoint(
        method="GET",
        path="/spend/balance",
        handler=balance,
        auth=Role.WALLET,
        sdk=Sdk(
            "spend.balance",
            doc="""Prepaid balance, policy and what is left of the allowance and budget.""",
        ),
        contract=Contract(response=SpendBalance),
    ),
    Endpoint(
        method="POST",
        path="/pay",
        handler=pay,
        run=Grouped(batch=pay_group),
        auth=Role.WALLET,
        idempotency="required",
        body=Pay,
        sdk=Sdk(
            "pay",
            "*, resource_id: str | None = None, destination: str | None = None, "
            "amount: Amount | None = None",
            build="pay_body",
        ),
        contract=Contract(
            response=PayResult,
            errors=(
                "not_found",
                "resource_inactive",
                "insufficient_funds",
                "max_per_tx_exceeded",
                "allowance_exceeded",
                "budget_exceeded",
                "rail_not_allowed",
                "idempotency_key_reused",
                "approval_declined",
                "approval_expired",
            ),
        ),
    ),
    Endpoint(
        method="GET",
        path="/handles/resolve/{destination}",
        handler=resolve,
        auth=Role.WALLET,
        sdk=Sdk(
            "handles.resolve",
            "destination: str",
            doc="""Check a transfer destination before paying it (wallet key).""",
        ),
        contract=Contract(response=HandleResolution),
    ),
]

"""Agent routes (wallet key): balance, ``POST /pay`` and handle resolution."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select

from svc import HandleResolution, PayResult, SpendBalance
from svc.bodies import Pay
from svc.money import to_micros

from ..domain import handles, payments, wallets
from ..domain.errors import PaymentRefused
from ..invariant import InvariantError
from ..store import tables as t
from ..web.auth import Role
from ..web.endpoint import Call, Endpoint
from ..web.errors import ApiError
from ..web.responses import Reply
from ..web.validate import Fields, checked

__all__ = ["ENDPOINTS"]


def balance(call: Call) -> Reply:
    """Prepaid balance and what the policy still allows (remaining allowance, next reset)."""
    agent = call.caller
    row = wallets.get_wallet_key(call.conn, agent.subject_id or "")
    return Reply(wallets.spend_balance_model(call.conn, row, call.now))


def pay(call: Call) -> Reply:
    """Pay an in-service resource (``resource_id``) or a handle (``destination``, ``amount``)."""
    agent = call.caller
    b = call.input(Pay)
    resource_id, destination, amount = b.resource_id, b.destination, b.amount
    f = Fields.rules(call.body)
    # A handle is paid the amount sent; a resource is paid its price, so none is sent.
    if destination is not None and resource_id is None and amount is None:
        f.error("amount", "is required")
    if (resource_id is None) == (destination is None):
        f.error("body", "needs either resource_id, or destination and amount")
    if resource_id is not None and f.present("amount"):
        f.error("amount", "is the resource's price; send resource_id alone")
    f.done()
    if agent.subject_id is None:
        raise InvariantError("expected agent.subject_id is not None")
    resource = None
    answered: list[Reply] = []

    def answer_ahead(result: PayResult) -> None:
        answered.append(Reply(result))
        call.answer_ahead(answered[-1])

    # A savepoint: a refused payment leaves nothing behind but its payment.failed.  A paid
    # one leaves it open (no RELEASE): the commit ends it with the transaction, and the
    # wallet key's and the seller's rows, locked by then, wait one round trip less.  Any
    # other error rolls the whole transaction back, savepoint and all.
    savepoint = call.conn.begin_nested()
    try:
        if resource_id is not None:
            resource = _payable_resource(call, resource_id, agent.environment)
            result = payments.pay_resource(
                call.conn,
                wallet_key_id=agent.subject_id,
                resource=resource,
                fee_bps=call.ctx.settings.platform_fee_bps,
                request_id=call.request_id,
                now=call.now,
                answer_ahead=answer_ahead,
            )
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
        payments.record_refusal(
            call.conn,
            refused,
            owner_id=agent.owner_id,
            environment=agent.environment,
            wallet_key_id=agent.subject_id,
            resource=resource,
            amount=None if amount is None else to_micros(amount),
            request_id=call.request_id,
            now=call.now,
        )
        return Reply.from_error(refused)
    return answered[-1] if answered else Reply(result)


def resolve(call: Call) -> Reply:
    """Check a transfer destination before paying it."""
    agent = call.caller
    row = _handle(call, call.params["destination"], agent.environment)
    return Reply(
        HandleResolution(
            destination="@" + row.handle, handle=row.handle, environment=row.environment
        )
    )


#: ``POST /pay``'s look-up of the resource, built once (every payment runs it).
_RESOURCE = select(t.resources).where(
    t.resources.c.id == bindparam("resource_id"),
    t.resources.c.environment == bindparam("environment"),
)


def _payable_resource(call: Call, resource_id: str, environment: str) -> Any:
    row = call.conn.execute(
        _RESOURCE, {"resource_id": resource_id, "environment": environment}
    ).first()
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
        response=SpendBalance,
    ),
    Endpoint(
        method="POST",
        path="/pay",
        handler=pay,
        auth=Role.WALLET,
        idempotency="required",
        body=Pay,
        response=PayResult,
        errors=(
            "not_found",
            "resource_inactive",
            "insufficient_funds",
            "max_per_tx_exceeded",
            "allowance_exceeded",
            "budget_exceeded",
            "rail_not_allowed",
        ),
    ),
    Endpoint(
        method="GET",
        path="/handles/resolve/{destination}",
        handler=resolve,
        auth=Role.WALLET,
        response=HandleResolution,
    ),
]

"""Payouts: the seller's payout account (Connect) and withdrawals, with the seller key,
and the owner dashboard's twins of every seller route under ``/sellers/{seller_id}``.

One code path: an owner twin is the seller route's own endpoint (handler, body, answer,
errors) with the owner JWT, whose handler first checks the seller belongs to the owner
(404 otherwise, never another owner's data) and then runs as that seller.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
from sqlalchemy import Row

from svc import ConnectAccount, ConnectLogin, ConnectOnboarding, Withdrawal, WithdrawalList
from svc.bodies import ConnectOnboard, UpdateConnect, Withdraw
from svc.money import to_micros

from ..domain import sellers
from ..domain.payouts import PayoutProcessor, processor_for, withdrawals
from ..domain.payouts import connect as accounts
from ..invariant import InvariantError
from ..web.auth import Principal, Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from . import resources
from . import sellers as seller_routes

__all__ = ["ENDPOINTS"]


def _seller(call: Call) -> Row[Any]:
    return sellers.get_seller(call.conn, call.caller.seller_id)


def _processor(call: Call, seller: Row[Any]) -> PayoutProcessor:
    return processor_for(call.ctx.settings, seller.environment, public_url=call.public_url)


def _account_model(call: Call, seller: Row[Any]) -> ConnectAccount:
    row = accounts.account_of(call.conn, seller.id)
    return accounts.connect_model(seller, row, call.ctx.settings.auto_payout_minimum_micros)


def connect_status(call: Call) -> Reply:
    """The payout account and its readiness flags as of the last sync."""
    return Reply(_account_model(call, _seller(call)))


def connect_onboard(call: Call) -> Reply:
    """Open the payout account (first call) and get a fresh onboarding link for a human."""
    seller = _seller(call)
    b = call.input(ConnectOnboard)
    _, link = accounts.onboard(
        call.conn,
        seller,
        _processor(call, seller),
        country=b.country.upper(),
        type=b.type,
        now=call.now,
    )
    return Reply(
        ConnectOnboarding(
            seller_id=seller.id,
            onboard_url=link.url,
            expires_at=link.expires_at,
            account=_account_model(call, seller),
        )
    )


def connect_sync(call: Call) -> Reply:
    """Read the readiness flags from the processor (payouts_enabled follows)."""
    seller = _seller(call)
    accounts.sync(call.conn, seller, _processor(call, seller), now=call.now)
    return Reply(_account_model(call, seller))


def connect_login(call: Call) -> Reply:
    """A link to the payout account's dashboard for a human, once onboarded."""
    seller = _seller(call)
    link = accounts.login(call.conn, seller, _processor(call, seller), now=call.now)
    return Reply(ConnectLogin(seller_id=seller.id, login_url=link.url, expires_at=link.expires_at))


def connect_update(call: Call) -> Reply:
    """Auto payout on or off, and its minimum (null: the server's default)."""
    seller = _seller(call)
    b = call.input(UpdateConnect)
    accounts.update_auto_payout(
        call.conn,
        seller,
        auto_payout=b.auto_payout,
        minimum_micros=None if b.auto_payout_minimum is None else to_micros(b.auto_payout_minimum),
        reset_minimum="auto_payout_minimum" in call.body,
        now=call.now,
    )
    return Reply(_account_model(call, seller))


def withdraw(call: Call) -> Reply:
    """Move seller balance (all that is available, or ``amount``) to the payout account."""
    seller = _seller(call)
    b = call.input(Withdraw)
    processor = _processor(call, seller)
    row = withdrawals.withdraw(
        call.conn,
        seller,
        amount=None if b.amount is None else to_micros(b.amount),
        processor=processor.name,
        request_id=call.request_id,
        now=call.now,
        unit_micros=processor.unit_micros,
    )
    return Reply(withdrawals.withdrawal_model(row), 201)


@paged
def list_withdrawals(call: Call, request: PageRequest) -> Reply:
    """The seller's withdrawals, newest first (paged)."""
    seller = _seller(call)
    page = withdrawals.list_withdrawals(call.conn, request, seller_id=seller.id)
    data = [withdrawals.withdrawal_model(r) for r in page.rows]
    return Reply(WithdrawalList(data=data, has_more=page.has_more))


def get_withdrawal(call: Call) -> Reply:
    """One withdrawal and its status."""
    seller = _seller(call)
    row = withdrawals.find_withdrawal(call.conn, seller.id, call.params["withdrawal_id"])
    return Reply(withdrawals.withdrawal_model(row))


_ME = "/sellers/me"

SELLER_ENDPOINTS = [
    Endpoint(
        method="GET",
        path=f"{_ME}/connect",
        handler=connect_status,
        auth=Role.SELLER,
        sdk=Sdk(
            "connect.status",
            owner=True,
            doc="""The payout account and its flags as of the last :meth:`sync`
            (no processor call).""",
        ),
        contract=Contract(response=ConnectAccount),
    ),
    Endpoint(
        method="PATCH",
        path=f"{_ME}/connect",
        handler=connect_update,
        auth=Role.SELLER,
        idempotency="optional",
        body=UpdateConnect,
        sdk=Sdk(
            "connect.update",
            "*, auto_payout: bool | NotGiven = NOT_GIVEN, "
            "auto_payout_minimum: Amount | NotGiven | None = NOT_GIVEN",
            owner=True,
            doc="""Auto payout on or off, and the balance it waits for; a field left out is kept.

            ``auto_payout_minimum=None`` (sent as JSON ``null``) returns to the server's
            default minimum.
            """,
            build="connect_update_body",
            keep_null=True,
        ),
        contract=Contract(response=ConnectAccount, errors=("conflict",)),
    ),
    Endpoint(
        method="POST",
        path=f"{_ME}/connect/onboard",
        handler=connect_onboard,
        auth=Role.SELLER,
        idempotency="optional",
        body=ConnectOnboard,
        sdk=Sdk(
            "connect.onboard",
            "country: str, type: ConnectType | None = None",
            owner=True,
            doc="""Open the payout account (first call) and get a fresh ``onboard_url``.

            ``country`` is two letters (``"US"``); ``type`` ``"express"`` (the default) or
            ``"standard"``.  A person completes the page in a browser; the link expires
            (``expires_at``), and calling again gives a fresh one.
            """,
            build="connect_onboard_body",
        ),
        contract=Contract(response=ConnectOnboarding, errors=("conflict", "payouts_unavailable")),
    ),
    Endpoint(
        method="POST",
        path=f"{_ME}/connect/sync",
        handler=connect_sync,
        auth=Role.SELLER,
        idempotency="optional",
        sdk=Sdk(
            "connect.sync",
            owner=True,
            doc="""Read the readiness flags from the processor: ``payouts_enabled`` once a human
            has completed onboarding, ``requirements_due`` otherwise.""",
        ),
        contract=Contract(response=ConnectAccount, errors=("conflict", "payouts_unavailable")),
    ),
    Endpoint(
        method="POST",
        path=f"{_ME}/connect/login",
        handler=connect_login,
        auth=Role.SELLER,
        idempotency="optional",
        sdk=Sdk(
            "connect.login",
            owner=True,
            doc="""A ``login_url`` to the payout account's dashboard, for a human, once
            onboarded.""",
        ),
        contract=Contract(response=ConnectLogin, errors=("conflict", "payouts_unavailable")),
    ),
    Endpoint(
        method="POST",
        path=f"{_ME}/withdraw",
        handler=withdraw,
        auth=Role.SELLER,
        idempotency="required",
        body=Withdraw,
        sdk=Sdk(
            "withdrawals.create",
            "amount: Amount | None = None",
            owner=True,
            doc="""Withdraw ``amount``, or the whole available balance when it is ``None``.

            The amount leaves the balance at once; watch ``status`` with :meth:`get`.  An
            ``Idempotency-Key`` is sent and reused by retries, so a retried call withdraws once.
            """,
        ),
        contract=Contract(
            response=Withdrawal,
            status=201,
            errors=("insufficient_funds", "payouts_not_enabled", "payouts_unavailable"),
        ),
    ),
    Endpoint(
        method="GET",
        path=f"{_ME}/withdrawals",
        handler=list_withdrawals,
        auth=Role.SELLER,
        sdk=Sdk(
            "withdrawals.list",
            owner=True,
            doc="""The seller's withdrawals, newest first.""",
            all_doc="""Every withdrawal of the seller, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=WithdrawalList),
    ),
    Endpoint(
        method="GET",
        path=f"{_ME}/withdrawals/{{withdrawal_id}}",
        handler=get_withdrawal,
        auth=Role.SELLER,
        sdk=Sdk(
            "withdrawals.get",
            "withdrawal_id: str",
            owner=True,
            doc="""One withdrawal and its ``status`` (``failure_reason`` when ``failed``).""",
        ),
        contract=Contract(response=Withdrawal),
    ),
]


# --- the owner dashboard: /sellers/{seller_id}/* --------------------------------------------


def _as_seller(call: Call) -> Call:
    """The call as the seller of ``{seller_id}``, once it is known to be the owner's
    (404 otherwise, in the owner JWT's environment)."""
    row = call.owned(sellers.find_owned_seller, "seller_id")
    seller = Principal(
        role=Role.SELLER,
        environment=row.environment,
        owner_id=row.owner_id,
        subject_id=row.id,
        credential_id=call.caller.credential_id,
    )
    return attrs.evolve(call, principal=seller)


def owner_twin(ep: Endpoint, path: str) -> Endpoint:
    """``ep`` (a seller-key route) for the owner JWT at ``path`` (under
    ``/sellers/{seller_id}``): same handler, body, answer and errors.  The SDK reaches it
    as ``ep``'s method with ``seller_id=`` (``Sdk(owner=True)``), one exception aside."""
    handler = ep.handler

    @functools.wraps(handler)  # keeps the paging mark of a list route
    def run(call: Call) -> Any:
        return handler(_as_seller(call))

    summary = ep.contract.summary or (handler.__doc__ or "").strip().splitlines()[0]
    return attrs.evolve(
        ep,
        path=path,
        handler=run,
        auth=Role.OWNER,
        contract=attrs.evolve(ep.contract, summary=f"Owner dashboard: {summary}"),
        sdk=_OWNER_SDK.get(path),
    )


def _find(endpoints: list[Endpoint], method: str, path: str) -> Endpoint:
    for ep in endpoints:
        if ep.method == method and ep.path == path:
            return ep
    raise InvariantError(f"no {method} {path} to mirror for the owner dashboard")


_OWNER = "/sellers/{seller_id}"
#: The one twin the SDK names apart: ``sellers.get(seller_id)``, not ``sellers.me(seller_id=)``.
_OWNER_SDK = {
    _OWNER: Sdk(
        "sellers.get",
        "seller_id: str",
        doc="""One of the owner's sellers (owner JWT; the owner dashboard's :meth:`me`).""",
    )
}

#: The seller routes an owner reaches for each of its sellers: the seller itself, its
#: balance and payments, its resources, and everything of payouts above.
_MIRRORED = [
    (_find(seller_routes.ENDPOINTS, "GET", _ME), _OWNER),
    (_find(seller_routes.ENDPOINTS, "GET", f"{_ME}/balance"), f"{_OWNER}/balance"),
    (_find(seller_routes.ENDPOINTS, "PATCH", f"{_ME}/payments"), f"{_OWNER}/payments"),
    (_find(resources.ENDPOINTS, "GET", "/resources"), f"{_OWNER}/resources"),
    *((ep, _OWNER + ep.path.removeprefix(_ME)) for ep in SELLER_ENDPOINTS),
]

OWNER_ENDPOINTS = [owner_twin(ep, path) for ep, path in _MIRRORED]

#: Seller routes first: ``/sellers/me/...`` must be matched before ``/sellers/{seller_id}/...``.
ENDPOINTS = [*SELLER_ENDPOINTS, *OWNER_ENDPOINTS]

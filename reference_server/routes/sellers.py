"""Seller accounts: owners create and list them; a seller manages itself with its key."""

from __future__ import annotations

from typing import Any

import attrs

from svc import Balance, Recycled, Seller, SellerCreated, SellerList
from svc.bodies import CreateSeller, EnablePayments, RecycleBalance
from svc.money import to_micros

from ..domain import sellers
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError
from ..web.paging import PageRequest, paged
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields, checksum_ok

__all__ = ["ENDPOINTS"]


def create_seller(call: Call) -> Reply:
    """Create a seller in the request's environment; its key is shown only here."""
    name = call.input(CreateSeller).name
    row, key = sellers.create_seller(
        call.conn,
        owner_id=call.caller.owner_id,
        environment=call.environment,
        name=name,
        now=call.now,
    )
    seller = sellers.seller_model(call.conn, row)
    created = SellerCreated(**attrs.asdict(seller, recurse=False), seller_key=key)
    return Reply(created, 201, secret=True)


@paged
def list_sellers(call: Call, request: PageRequest) -> Reply:
    """The owner's sellers in the request's environment, oldest first (paged)."""
    page = sellers.list_sellers(
        call.conn, request, owner_id=call.caller.owner_id, environment=call.environment
    )
    data = [sellers.seller_model(call.conn, r) for r in page.rows]
    return Reply(SellerList(data=data, has_more=page.has_more))


def get_me(call: Call) -> Reply:
    """The seller that owns the key."""
    row = sellers.get_seller(call.conn, call.caller.seller_id)
    return Reply(sellers.seller_model(call.conn, row))


def enable_payments(call: Call) -> Reply:
    """Turn on MPP and x402 for every gate of the seller; optionally set where money goes."""
    b = call.input(EnablePayments)
    profile, wallet = b.processor_profile_id, b.payout_wallet_address
    f = Fields.rules(call.body)
    if wallet is not None and not checksum_ok(wallet):
        f.error("payout_wallet_address", "has an invalid EIP-55 checksum (mixed-case typo?)")
    f.done()
    values: dict[str, Any] = {"mpp_enabled": True, "x402_enabled": True}
    if profile is not None:
        values["processor_profile_id"] = profile
    if wallet is not None or "payout_wallet_address" in call.body:  # null: processor deposit
        values["payout_wallet_address"] = wallet
    row = sellers.update_seller(call.conn, call.caller.seller_id, **values)
    return Reply(sellers.seller_model(call.conn, row))


def balance(call: Call) -> Reply:
    """Balance and readiness flags; check them before retrying a withdraw."""
    seller = sellers.seller_model(call.conn, sellers.get_seller(call.conn, call.caller.seller_id))
    if seller.balance is None:
        raise ApiError("internal_error", "seller has no balance account")
    return Reply(
        Balance(
            seller_id=seller.id,
            environment=seller.environment,
            balance=seller.balance,
            payouts_enabled=seller.payouts_enabled,
            mpp_enabled=seller.mpp_enabled,
            x402_enabled=seller.x402_enabled,
        )
    )


def recycle(call: Call) -> Reply:
    """Move seller balance (all of it, or ``amount``) into the owner's account wallet."""
    amount = call.input(RecycleBalance).amount
    row = call.owned(sellers.find_owned_seller, "seller_id")
    result = sellers.recycle(
        call.conn,
        row,
        amount=None if amount is None else to_micros(amount),
        request_id=call.request_id,
        now=call.now,
    )
    return Reply(result)


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/sellers",
        handler=create_seller,
        auth=Role.OWNER,
        idempotency="optional",
        body=CreateSeller,
        sdk=Sdk(
            "sellers.create",
            "name: str | None = None",
            doc="""Create a seller (owner JWT).  Keep ``seller_key``: it is never shown again.""",
        ),
        contract=Contract(response=SellerCreated, status=201),
    ),
    Endpoint(
        method="GET",
        path="/sellers",
        handler=list_sellers,
        auth=Role.OWNER,
        sdk=Sdk(
            "sellers.list",
            doc="""The owner's sellers in this environment (owner JWT), oldest first.""",
            all_doc="""Every seller of the owner, in the order of :meth:`list`.""",
        ),
        contract=Contract(response=SellerList),
    ),
    Endpoint(
        method="GET",
        path="/sellers/me",
        handler=get_me,
        auth=Role.SELLER,
        sdk=Sdk(
            "sellers.me",
            doc="""The seller the seller key belongs to.""",
        ),
        contract=Contract(response=Seller),
    ),
    Endpoint(
        method="PATCH",
        path="/sellers/me/payments",
        handler=enable_payments,
        auth=Role.SELLER,
        idempotency="optional",
        body=EnablePayments,
        sdk=Sdk(
            "sellers.enable_payments",
            "*, processor_profile_id: str | None = None, payout_wallet_address: str | None = None",
            owner=True,
            doc="""Turn on MPP and x402 for the seller's gates; check ``mpp_enabled`` on the result.

            With ``payout_wallet_address`` (EVM) open-rail USDC goes straight to that wallet
            and the seller balance is not credited.  With ``seller_id``, for that seller of
            the owner (owner JWT).
            """,
        ),
        contract=Contract(response=Seller),
    ),
    Endpoint(
        method="GET",
        path="/sellers/me/balance",
        handler=balance,
        auth=Role.SELLER,
        sdk=Sdk(
            "sellers.balance",
            owner=True,
            doc="""Balance and the payout readiness flags to check before a withdraw.

            With ``seller_id``, that seller's of the owner (owner JWT).
            """,
        ),
        contract=Contract(response=Balance),
    ),
    Endpoint(
        method="POST",
        path="/sellers/{seller_id}/recycle",
        handler=recycle,
        auth=Role.OWNER,
        idempotency="required",
        body=RecycleBalance,
        sdk=Sdk(
            "sellers.recycle",
            "seller_id: str, amount: Amount | None = None",
            doc="""Owner call: move seller balance (all, or ``amount``) into the account wallet.""",
        ),
        contract=Contract(response=Recycled, errors=("insufficient_funds",)),
    ),
]

"""Set-ups shared by the money tests: a seller with a priced resource, a funded agent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs
from sqlalchemy import select

import svc
from reference_server.store import tables as t

from ..support import LiveServer, new_account


@attrs.frozen
class Market:
    owner: svc.Client  # the agent's owner (wallet keys)
    agent: svc.Client  # wallet key
    seller: svc.Client  # seller key
    resource: svc.Resource
    wallet_key_id: str
    wallet_key: str
    owner_jwt: str
    seller_owner_id: str
    seller_owner_jwt: str
    seller_id: str
    seller_key: str


def market(
    live: LiveServer,
    *,
    price: str = "1.00",
    fund: str | None = "100.00",
    metadata: dict[str, Any] | None = None,
    **policy: Any,
) -> Market:
    """A seller (one account) selling one resource; an agent (another account) with a
    wallet key minted with ``policy`` and funded with ``fund`` in test."""
    sellers = new_account(live.url)
    agents = new_account(live.url)
    seller = svc.Client(base_url=live.url, seller_key=sellers.seller_key, max_retries=0)
    resource = seller.resources.create(
        kind="http", path="/v1/report", amount=price, metadata=metadata
    )
    owner = svc.Client(
        base_url=live.url, owner_jwt=agents.owner_jwt, environment="test", max_retries=0
    )
    key = owner.wallet_keys.create(name="agent", **policy)
    if fund is not None:
        owner.wallet_keys.fund(key.id, fund)
    agent = svc.Client(base_url=live.url, wallet_key=key.key, max_retries=0)
    return Market(
        owner=owner,
        agent=agent,
        seller=seller,
        resource=resource,
        wallet_key_id=key.id,
        wallet_key=key.key,
        owner_jwt=agents.owner_jwt,
        seller_owner_id=sellers.owner_id,
        seller_owner_jwt=sellers.owner_jwt,
        seller_id=sellers.seller_id,
        seller_key=sellers.seller_key,
    )


def events_of(live: LiveServer, owner_id: str, event_type: str) -> list[dict[str, Any]]:
    e = t.events
    with live.ctx.db.read() as conn:
        rows = conn.execute(
            select(e.c.data, e.c.environment)
            .where(e.c.owner_id == owner_id, e.c.type == event_type)
            .order_by(e.c.created_at, e.c.id)
        ).all()
    return [{**row.data, "_environment": row.environment} for row in rows]


def D(text: str) -> Decimal:
    return Decimal(text)

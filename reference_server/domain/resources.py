"""Priced resources (SKUs): what a seller charges for, and the URLs agents and humans pay.

``gate_url`` (``/g/<short_id>``) is what an agent pays; ``pay_url`` (``/buy/<short_id>``)
is the buy page where a person pays for the same resource by card.  Both hang off the
server's public URL.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, insert, select, update
from sqlalchemy.exc import IntegrityError

from svc import Resource, ResourceMetadata
from svc.money import from_micros, to_micros
from svc.wire import structure, unstructure

from ..ids import new_id, new_short_id
from ..store import tables as t
from ..timeutil import as_utc
from . import paging
from .events import record_event
from .paging import Page, PageRequest

__all__ = [
    "DIRECTORY_SELLER_COLUMNS",
    "create_resource",
    "directory_page",
    "find_any_resource",
    "find_resource",
    "fixed_price_micros",
    "list_resources",
    "resource_model",
    "update_resource",
]

_r = t.resources


def create_resource(
    conn: Connection,
    *,
    seller_id: str,
    environment: str,
    kind: str,
    path: str | None,
    tool: str | None,
    amount: Decimal,
    description: str | None,
    metadata: dict[str, Any],
    upstream_url: str | None,
    listed: bool,
    now: datetime,
    method: str | None = None,
    body_hint: dict[str, Any] | None = None,
    pricing: dict[str, Any] | None = None,
) -> Row[Any]:
    """``amount`` is the price, or a metered resource's maximum; ``pricing`` holds the
    metered columns (:func:`pricing_columns`)."""
    resource_id = new_id("res")
    for _ in range(5):
        short_id = new_short_id()
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(_r).values(
                        id=resource_id,
                        short_id=short_id,
                        seller_id=seller_id,
                        environment=environment,
                        kind=kind,
                        path=path,
                        tool=tool,
                        amount_micros=to_micros(amount),
                        description=description,
                        metadata=metadata,
                        upstream_url=upstream_url,
                        listed=listed,
                        method=method,
                        body_hint=body_hint,
                        **(pricing or {}),
                        active=True,
                        created_at=now,
                        updated_at=now,
                    )
                )
            break
        except IntegrityError:  # a short id collision (62**10 space): draw again
            continue
    else:  # pragma: no cover - five collisions in a row
        raise RuntimeError("could not allocate a short id")
    return conn.execute(select(_r).where(_r.c.id == resource_id)).one()


def find_resource(
    conn: Connection, resource_id: str, *, seller_id: str, for_update: bool = False
) -> Row[Any] | None:
    """The seller's own resource, or ``None`` (another seller's id is just as unknown)."""
    query = select(_r).where(_r.c.id == resource_id, _r.c.seller_id == seller_id)
    if for_update and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).first()


def find_any_resource(conn: Connection, resource_id: str) -> Row[Any] | None:
    """A resource whoever sells it (for gates and buy pages, which are public)."""
    return conn.execute(select(_r).where(_r.c.id == resource_id)).first()


def list_resources(conn: Connection, request: PageRequest, *, seller_id: str) -> Page:
    """The seller's resources, oldest first, inactive ones included."""
    scope = [_r.c.seller_id == seller_id]
    return paging.page(conn, request, select(_r), table=_r, scope=scope, order="asc")


#: The seller's columns a directory row carries beside the resource's (``seller_*``).
DIRECTORY_SELLER_COLUMNS = ("name", "x402_enabled", "mpp_enabled", "payout_wallet_address")


def directory_page(
    conn: Connection,
    request: PageRequest,
    *,
    environment: str,
    kind: str | None = None,
    text: str | None = None,
    max_amount: Decimal | None = None,
) -> Page:
    """The environment's listed, active resources, oldest first, each row with its
    seller's ``seller_name``, ``seller_x402_enabled`` ... (``DIRECTORY_SELLER_COLUMNS``).

    A cursor may name any listed resource of the environment, deactivated since included
    (it was in the directory, so nothing is told that was not).  ``text`` matches the
    description, case-insensitively; ``max_amount`` keeps the prices at most it.
    """
    s = t.sellers
    query = select(
        _r, *(s.c[name].label(f"seller_{name}") for name in DIRECTORY_SELLER_COLUMNS)
    ).join(s, s.c.id == _r.c.seller_id)
    scope = [_r.c.environment == environment, _r.c.listed.is_(True)]
    where: list[ColumnElement[bool]] = [_r.c.active.is_(True)]
    if kind is not None:
        where.append(_r.c.kind == kind)
    if text is not None:
        where.append(_r.c.description.icontains(text, autoescape=True))
    if max_amount is not None:
        where.append(_r.c.amount_micros <= to_micros(max_amount))
    return paging.page(conn, request, query, table=_r, scope=scope, order="asc", where=where)


def fixed_price_micros(resource: Row[Any]) -> int | None:
    """What a rail that charges a set price (a card, an MPP ``charge``) charges for the
    resource: a fixed one's price, a metered one's fallback price; ``None`` when it has
    none (a metered resource without a fallback is not sold on that rail)."""
    if resource.pricing == "metered":
        fallback = resource.fallback_amount_micros
        return None if fallback is None else int(fallback)
    return int(resource.amount_micros)


def pricing_columns(
    *, unit_price: Decimal, unit: str, fallback_amount: Decimal | None
) -> dict[str, Any]:
    """The columns of a metered resource beside its maximum (``amount_micros``)."""
    return {
        "pricing": "metered",
        "unit_price_micros": to_micros(unit_price),
        "unit": unit,
        "fallback_amount_micros": None if fallback_amount is None else to_micros(fallback_amount),
    }


#: Changed columns as ``resource.updated`` names them (the wire's field names).
_WIRE_NAMES = {
    "amount_micros": "amount",
    "unit_price_micros": "unit_price",
    "fallback_amount_micros": "fallback_amount",
}


def update_resource(
    conn: Connection,
    row: Row[Any],
    changes: dict[str, Any],
    *,
    owner_id: str,
    public_url: str,
    now: datetime,
) -> Row[Any]:
    """Apply changes and emit ``resource.updated`` in the same transaction."""
    values = dict(changes)
    for column, name in _WIRE_NAMES.items():
        if name in values:
            values[column] = to_micros(values.pop(name))
    changed = sorted(k for k, v in values.items() if getattr(row, k) != v)
    if changed:
        values["updated_at"] = now
        conn.execute(update(_r).where(_r.c.id == row.id).values(**values))
    new_row = conn.execute(select(_r).where(_r.c.id == row.id)).one()
    if changed:
        changed_names = [_WIRE_NAMES.get(c, c) for c in changed]
        record_event(
            conn,
            owner_id=owner_id,
            environment=row.environment,
            type="resource.updated",
            data={
                "resource": unstructure(resource_model(new_row, public_url)),
                "changed": changed_names,
            },
            now=now,
        )
    return new_row


def resource_model(row: Row[Any], public_url: str) -> Resource:
    base = public_url.rstrip("/")
    amount = from_micros(row.amount_micros)
    metered = row.pricing == "metered"
    return Resource(
        id=row.id,
        short_id=row.short_id,
        kind=row.kind,
        path=row.path,
        tool=row.tool,
        path_or_tool=row.path if row.kind == "http" else row.tool,
        amount=amount,
        pricing=row.pricing,
        unit_price=from_micros(row.unit_price_micros) if metered else None,
        unit=row.unit if metered else None,
        max_amount=amount if metered else None,
        fallback_amount=(
            None if row.fallback_amount_micros is None else from_micros(row.fallback_amount_micros)
        ),
        description=row.description,
        metadata=structure(row.metadata, ResourceMetadata),
        active=row.active,
        upstream_url=row.upstream_url,
        listed=row.listed,
        method=row.method,
        body_hint=row.body_hint,
        gate_url=f"{base}/g/{row.short_id}",
        pay_url=f"{base}/buy/{row.short_id}",
        seller_id=row.seller_id,
        environment=row.environment,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )

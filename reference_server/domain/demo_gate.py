"""The demonstration gate's seller and resource, seeded once per environment.

``GET /demo/echo`` is a real priced resource (0.01, one_shot) owned by a platform seller,
so an agent can try the whole pay-then-unlock loop on a fresh server: pay it with
``POST /pay {"resource_id": <seed id>}``, then call ``/demo/echo`` with the receipt.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, select

from ..store import tables as t
from . import ledger
from .owners import create_owner, find_owner_by_email
from .resources import create_resource
from .sellers import create_seller

__all__ = ["DEMO_AMOUNT", "DEMO_PATH", "ensure_demo_resources"]

DEMO_OWNER_EMAIL = "demo@svc.invalid"
DEMO_PATH = "/demo/echo"
DEMO_AMOUNT = Decimal("0.01")


def ensure_demo_resources(conn: Connection, now: datetime) -> dict[str, str]:
    """``{environment: resource_id}`` of the demo resource, created on first call."""
    owner_id = find_owner_by_email(conn, DEMO_OWNER_EMAIL) or create_owner(
        conn, DEMO_OWNER_EMAIL, now
    )
    found: dict[str, str] = {}
    for env in ledger.ENVIRONMENTS:
        r, s = t.resources, t.sellers
        existing = conn.execute(
            select(r.c.id)
            .join(s, s.c.id == r.c.seller_id)
            .where(s.c.owner_id == owner_id, r.c.environment == env, r.c.path == DEMO_PATH)
        ).scalar()
        if existing is None:
            seller, _key = create_seller(
                conn, owner_id=owner_id, environment=env, name="svc demo", now=now
            )
            existing = create_resource(
                conn,
                seller_id=seller.id,
                environment=env,
                kind="http",
                path=DEMO_PATH,
                tool=None,
                amount=DEMO_AMOUNT,
                description="Demonstration gate: echoes the request once paid.",
                metadata={"sku_kind": "one_shot", "credits": None, "credit_unit": None},
                upstream_url=None,
                listed=True,
                now=now,
            ).id
        found[env] = existing
    return found

"""Webhook endpoints: where an owner's events go, per environment.

An endpoint receives the events of its owner in its environment — a ``test`` payment never
reaches a ``live`` endpoint — filtered by its optional ``events`` allowlist.  Its signing
secret is returned once, at creation, and kept sealed (the worker must sign with it).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, insert, select, update

from svc import WebhookEndpoint

from ..crypto import SecretBox
from ..ids import new_id
from ..store import tables as t
from ..timeutil import as_utc
from . import paging
from .owners import find_owned_row
from .paging import Page, PageRequest

__all__ = [
    "LISTED",
    "LISTEN_URL",
    "create_endpoint",
    "endpoint_model",
    "find_owned_endpoint",
    "list_endpoints",
    "matching_endpoints",
    "new_signing_secret",
    "set_status",
]

_e = t.webhook_endpoints

#: The URL of a listener endpoint (``svc listen``): the worker never sends its deliveries
#: over HTTP; the listening CLI claims them (``outbox.delivery.claim_listened``).
LISTEN_URL = "listen:"

#: The endpoints an owner's lists show (the API's and the dashboard's): not deleted, and
#: not ``svc listen``'s listeners, which come and go with a terminal and are not where
#: events are sent (each is still found by its id).
LISTED = (_e.c.status != "deleted", _e.c.url != LISTEN_URL)


def new_signing_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def create_endpoint(
    conn: Connection,
    *,
    owner_id: str,
    environment: str,
    url: str,
    events: list[str] | None,
    description: str | None,
    secret: str,
    box: SecretBox,
    now: datetime,
) -> Row[Any]:
    endpoint_id = new_id("we")
    conn.execute(
        insert(_e).values(
            id=endpoint_id,
            owner_id=owner_id,
            environment=environment,
            url=url,
            events=events,
            description=description,
            secret_sealed=box.seal(secret),
            status="enabled",
            created_at=now,
        )
    )
    return conn.execute(select(_e).where(_e.c.id == endpoint_id)).one()


def find_owned_endpoint(
    conn: Connection, endpoint_id: str, *, owner_id: str, environment: str
) -> Row[Any]:
    return find_owned_row(
        conn,
        _e,
        endpoint_id,
        owner_id=owner_id,
        environment=environment,
        what="webhook endpoint",
        where=(_e.c.status != "deleted",),
    )


def list_endpoints(
    conn: Connection, request: PageRequest, *, owner_id: str, environment: str
) -> Page:
    """The owner's endpoints in ``environment``, oldest first, deleted ones left out (an
    endpoint deleted since the previous page still works as its cursor), and ``svc
    listen``'s listeners too: they come and go with a terminal, and are not where events
    are sent (each is still found by its id)."""
    return paging.page(
        conn,
        request,
        select(_e),
        table=_e,
        scope=[_e.c.owner_id == owner_id, _e.c.environment == environment],
        where=list(LISTED),
        order="asc",
    )


def _enabled(owner_id: Any, environment: Any) -> Any:
    """The owner's enabled endpoints in the environment, as a condition (both reads of
    them, :data:`_ENABLED` and :func:`any_enabled`, select by it)."""
    return and_(
        _e.c.owner_id == owner_id, _e.c.environment == environment, _e.c.status == "enabled"
    )


#: ``matching_endpoints``' statement, built once: every event of every payment runs it.
_ENABLED = select(_e.c.id, _e.c.events).where(
    _enabled(bindparam("owner_id"), bindparam("environment"))
)


def any_enabled(owner_id: Any, environment: Any) -> Any:
    """Whether the owner has an enabled endpoint in the environment, as an expression
    (SQL ``EXISTS``) for a read of something else: a payment reads it with its resource
    and, as most sellers' owners have none, seldom needs :func:`matching_endpoints`."""
    return select(_e.c.id).where(_enabled(owner_id, environment)).exists()


def matching_endpoints(
    conn: Connection, *, owner_id: str, environment: str, event_type: str
) -> list[str]:
    """Ids of the enabled endpoints that want this event."""
    rows = conn.execute(_ENABLED, {"owner_id": owner_id, "environment": environment})
    return [row.id for row in rows if row.events is None or event_type in row.events]


def set_status(
    conn: Connection, endpoint_id: str, status: str, *, reason: str | None = None
) -> None:
    values: dict[str, Any] = {"status": status, "disabled_reason": reason}
    if status == "enabled":
        values["failing_since"] = None
    conn.execute(update(_e).where(_e.c.id == endpoint_id).values(**values))


def endpoint_model(row: Row[Any]) -> WebhookEndpoint:
    return WebhookEndpoint(
        id=row.id,
        url=row.url,
        environment=row.environment,
        events=row.events,
        description=row.description,
        status=row.status,
        disabled_reason=row.disabled_reason,
        created_at=as_utc(row.created_at),
    )

"""``POST /handles`` (owner JWT): claim an ``@name`` for the account wallet."""

from __future__ import annotations

from ..api.auth import Role
from ..api.endpoint import Call, Endpoint
from ..api.responses import Reply
from ..api.validate import Fields
from ..domain import handles
from ..invariant import InvariantError

__all__ = ["ENDPOINTS"]


def claim(call: Call) -> Reply:
    """Claim a handle in this environment; transfers to it land in your account wallet."""
    if call.principal is None:
        raise InvariantError("a route that requires a credential ran without one")
    f = Fields(call.body)
    raw = f.string("handle", required=True, max_length=31)
    name = None if raw is None else handles.normalize_handle(raw)
    if raw is not None and name is None:
        f.error("handle", "must be 3-30 lowercase letters, digits, _ or -, optionally after @")
    f.done()
    if name is None:
        raise InvariantError("expected name is not None")
    row = handles.claim_handle(
        call.conn,
        owner_id=call.principal.owner_id,
        environment=call.environment,
        handle=name,
        now=call.now,
    )
    return Reply(handles.handle_model(row), 201)


ENDPOINTS = [
    Endpoint(
        method="POST", path="/handles", handler=claim, auth=Role.OWNER, idempotency="optional"
    ),
]

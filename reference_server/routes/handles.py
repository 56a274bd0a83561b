"""``POST /handles`` (owner JWT): claim an ``@name`` for the account wallet."""

from __future__ import annotations

from svc import Handle
from svc.bodies import ClaimHandle

from ..domain import handles
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint
from ..web.responses import Reply
from ..web.sdk import Sdk
from ..web.validate import Fields, checked

__all__ = ["ENDPOINTS"]


def claim(call: Call) -> Reply:
    """Claim a handle in this environment; transfers to it land in your account wallet."""
    f = Fields.rules(call.body)
    # The body's pattern says the same, with case and surrounding spaces allowed.
    name = handles.normalize_handle(call.input(ClaimHandle).handle)
    if name is None:
        f.error("handle", "must be 3-30 lowercase letters, digits, _ or -, optionally after @")
    f.done()
    row = handles.claim_handle(
        call.conn,
        owner_id=call.caller.owner_id,
        environment=call.environment,
        handle=checked(name),
        now=call.now,
    )
    return Reply(handles.handle_model(row), 201)


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/handles",
        handler=claim,
        auth=Role.OWNER,
        idempotency="optional",
        body=ClaimHandle,
        sdk=Sdk(
            "handles.create",
            "handle: str",
            doc="""Claim ``handle`` (``"name"`` or ``"@name"``) for the owner (owner JWT).""",
            build="handle_body",
        ),
        contract=Contract(response=Handle, status=201, errors=("handle_taken",)),
    ),
]

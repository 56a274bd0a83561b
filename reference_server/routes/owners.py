"""``POST /owners``: self-service sign-up, where the operator allows it."""

from __future__ import annotations

from svc import OwnerCreated
from svc.bodies import CreateOwner

from ..domain.owners import create_owner
from ..web.auth import issue_owner_jwt
from ..web.endpoint import Call, Contract, Endpoint
from ..web.errors import ApiError
from ..web.responses import Reply
from ..web.sdk import Sdk

__all__ = ["ENDPOINTS"]


def sign_up(call: Call) -> Reply:
    """Create an owner and return its JWT (the JWT is not stored; keep it)."""
    if not call.ctx.settings.signup_open:
        raise ApiError(
            "signup_disabled",
            "Sign-up is disabled here; an operator creates owners with "
            "'svc-server owners create --email ...'.",
        )
    email = call.input(CreateOwner).email.strip().lower()
    owner_id = create_owner(call.conn, email, call.now)
    token = issue_owner_jwt(
        owner_id, call.ctx.jwt_secret, call.now, call.ctx.settings.jwt_ttl_seconds
    )
    return Reply(OwnerCreated(owner_id=owner_id, owner_jwt=token), status=201, secret=True)


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/owners",
        handler=sign_up,
        idempotency="none",
        rate_limit="signup_rate_limit",
        body=CreateOwner,
        sdk=Sdk(
            "owners.create",
            "email: str",
            doc="""Create an owner; the returned ``owner_jwt`` authorizes the owner routes.""",
        ),
        contract=Contract(
            response=OwnerCreated, status=201, errors=("signup_disabled", "email_taken")
        ),
    ),
]

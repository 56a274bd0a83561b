"""Open rails for a seller's own gate: ``POST /gates/challenge`` and ``POST /gates/redeem``.

A seller's app runs ``svc_asgi.PaymentGate``, which holds no keys and imports neither x402
nor MPP: for an unpaid request it asks here for the challenge headers, and for a request
carrying a credential it asks here to verify and settle it, with the seller key.  Both
are answered by the same domain code as the hosted gates
(:mod:`reference_server.domain.open_rails`)::

    POST /gates/challenge {"resource_id", "method", "url"}
        -> {"headers": [[name, value], ...]}   (empty until the seller enables payments)
    POST /gates/redeem {"resource_id", "method", "url", "headers": {"PAYMENT-SIGNATURE"
                        | "Authorization": ...}}
        -> {"paid": true, "rail", "verification": {...}, "headers": [...]}
         | {"paid": false, "rail", "reason", "message", "headers": [...]}

``url`` is the absolute URL the client addressed, query included, and ``method`` its
method: both protocols bind the challenge to them, so the challenge and the redemption of
one payment must send the same pair.

Their handlers are async: settling awaits pympp (and, live, a facilitator), which must not
hold a database transaction open, so the pipeline awaits them with none; the rate limit per
credential, the JSON body rules, seller-key authentication, the envelope and
``request_id`` are the pipeline's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread

from svc import GateChallenge
from svc.receipts import RAIL_CREDENTIAL_HEADERS
from svc_asgi import RailRequest

from ..api.auth import Principal, Role
from ..api.endpoint import Call, Endpoint
from ..api.errors import ApiError
from ..api.responses import Reply
from ..api.text import first_forbidden
from ..api.validate import checked
from ..context import ServerContext
from ..domain import open_rails
from ..invariant import InvariantError

__all__ = ["ENDPOINTS"]

_METHOD = re.compile(r"^[A-Za-z]{1,16}$")
_MAX_URL = 4096
#: A credential header this long is not a credential (x402's is about 1.5 KB).
_MAX_CREDENTIAL = 16 * 1024


# --- the two routes -------------------------------------------------------------------------


async def challenge(call: Call) -> Reply:
    """Open-rail challenge for an unpaid request to the seller's own gate."""
    resource_id, rail_request, _ = _read(call.body, with_headers=False)
    gate = await _gate(call, resource_id)
    return Reply(GateChallenge(headers=await open_rails.challenge(call.ctx, gate, rail_request)))


async def redeem(call: Call) -> Reply:
    """Verify and settle an open-rail credential presented at the seller's own gate."""
    resource_id, rail_request, credentials = _read(call.body, with_headers=True)
    gate = await _gate(call, resource_id)
    if not gate.resource.active:
        raise ApiError(
            "resource_inactive",
            f"Resource {resource_id} is deactivated; it cannot be bought or used.",
        )
    try:
        redemption = await open_rails.redeem(
            call.ctx, gate, rail_request, credentials, request_id=call.request_id
        )
    except open_rails.SettlementUnavailable as exc:
        raise ApiError(
            "settlement_unavailable",
            f"The payment could not be settled now ({exc}); do not pay again, retry shortly.",
            headers={"Retry-After": "5"},
        ) from None
    return Reply(redemption.model())


# --- reading the body -----------------------------------------------------------------------


def _read(body: dict[str, Any], *, with_headers: bool) -> tuple[str, RailRequest, dict[str, str]]:
    """``(resource_id, the request, its credentials)``, or 400 ``invalid_rail_request``
    listing every problem."""
    errors: list[dict[str, str]] = []

    def bad(field: str, message: str) -> None:
        errors.append({"field": field, "message": message})

    resource_id = body.get("resource_id")
    if not isinstance(resource_id, str) or not 0 < len(resource_id) <= 40:
        bad("resource_id", "must be a resource id")
    method = body.get("method")
    if not isinstance(method, str) or not _METHOD.fullmatch(method):
        bad("method", "must be an HTTP method such as GET")
    url = body.get("url")
    if not isinstance(url, str) or not _absolute(url):
        bad("url", "must be the absolute http(s) URL the client addressed, query included")
    credentials: dict[str, str] = {}
    if with_headers:
        credentials = _credentials(body.get("headers"), bad)
    known = {"resource_id", "method", "url", *(("headers",) if with_headers else ())}
    for name in body:
        if name not in known:
            bad(name, "is not a known field")
    if errors:
        raise ApiError(
            "invalid_rail_request",
            "Invalid request: " + "; ".join(f"{e['field']} {e['message']}" for e in errors) + ".",
            details={"errors": errors},
        )
    if not (isinstance(resource_id, str) and isinstance(method, str) and isinstance(url, str)):
        raise InvariantError("resource_id, method and url passed validation as strings")
    return resource_id, RailRequest(method.upper(), url), credentials


def _absolute(url: str) -> bool:
    if len(url) > _MAX_URL or not url.isascii() or any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _credentials(value: object, bad: Callable[[str, str], None]) -> dict[str, str]:
    """The credential headers: ``PAYMENT-SIGNATURE`` and/or ``Authorization: Payment …``,
    any case, and nothing else (the seller's app forwards no other header)."""
    if not isinstance(value, dict) or not value:
        bad("headers", "must be an object holding PAYMENT-SIGNATURE or Authorization")
        return {}
    found: dict[str, str] = {}
    for name, header in value.items():
        lowered = name.lower()
        where = f"headers.{name}"
        if lowered not in RAIL_CREDENTIAL_HEADERS:
            bad(where, "is not a credential header (PAYMENT-SIGNATURE, Authorization)")
        elif not isinstance(header, str) or not 0 < len(header) <= _MAX_CREDENTIAL:
            bad(where, f"must be a string of at most {_MAX_CREDENTIAL} characters")
        elif not header.isascii() or first_forbidden(header) is not None:
            bad(where, "must be printable ASCII, as an HTTP header is")
        elif lowered == "authorization" and header[:8].lower() != "payment ":
            bad(where, "must be of the Payment scheme (MPP)")
        elif lowered in found:
            bad(where, "is given twice")
        else:
            found[lowered] = header
    return found


# --- the seller's gate -----------------------------------------------------------------------


async def _gate(call: Call, resource_id: str) -> open_rails.Gate:
    """The seller's own resource (another seller's id is as unknown as a made-up one)."""
    ctx: ServerContext = call.ctx
    principal: Principal = checked(call.principal)
    realm = urlsplit(call.public_url).netloc

    def load() -> open_rails.Gate | None:
        with ctx.db.read() as conn:
            return open_rails.load_gate(
                conn, resource_id, realm=realm, seller_id=principal.seller_id
            )

    gate = await anyio.to_thread.run_sync(load)
    if gate is None:
        raise ApiError("not_found", "No such resource.")
    return gate


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/gates/challenge",
        handler=challenge,
        auth=Role.SELLER,
        summary="Open-rail challenge (x402 PAYMENT-REQUIRED, MPP WWW-Authenticate) for an "
        "unpaid request {resource_id, method, url} to the seller's own gate; empty until "
        "payments are enabled.",
    ),
    Endpoint(
        method="POST",
        path="/gates/redeem",
        handler=redeem,
        auth=Role.SELLER,
        summary="Verify and settle an x402 PAYMENT-SIGNATURE or MPP Authorization: Payment "
        "credential {resource_id, method, url, headers} presented at the seller's own gate.",
    ),
]

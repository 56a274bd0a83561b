"""Open rails for a seller's own gate: ``POST /gates/challenge``, ``/gates/redeem``,
``/gates/settle`` and ``/gates/release`` (docs/gate.md, "Open rails: the seam").

A seller's app runs ``svc_asgi.PaymentGate``, which holds no keys and imports neither x402
nor MPP: for an unpaid request it asks here for the challenge headers; for a request
carrying a credential it asks here to verify it and claim its nonce, serves the request,
then asks here to settle the claim (the answer's status was below 400) or to release it
(nothing is charged for a failed answer).  A claim neither settled nor released expires
and is released (the server's housekeeping).

``url`` and ``method`` are the request the client addressed: both protocols bind the
challenge to them, so the challenge and the redemption of one payment send the same pair.
The handlers are async: settling awaits pympp (and, live, a facilitator), which must not
hold a database transaction open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread

from svc import GateChallenge, GateRedemption, GateRelease
from svc.bodies import RedeemCredential, ReleaseClaim, RequestChallenge, SettleClaim
from svc.money import MAX_UNITS
from svc.receipts import RAIL_CREDENTIAL_HEADERS
from svc_asgi import RailRequest

from ...context import ServerContext
from ...domain import gate_origins, open_rails
from ...web.auth import Role
from ...web.endpoint import Call, Contract, Endpoint, Flow
from ...web.errors import ApiError, invalid, settlement_unavailable
from ...web.responses import Reply
from ...web.sdk import Sdk
from ...web.text import first_forbidden
from ...web.validate import Fields

__all__ = ["ENDPOINTS"]

_MAX_URL = 4096
#: A credential header this long is not a credential (x402's is about 1.5 KB).
_MAX_CREDENTIAL = 16 * 1024


# --- the two routes -------------------------------------------------------------------------


async def challenge(call: Call) -> Reply:
    """Open-rail challenge for an unpaid request to the seller's own gate."""
    b = call.input(RequestChallenge)
    rail_request, _ = _checked(call, b.method, b.url)
    gate = await _gate(call, b.resource_id, b.url)
    return Reply(GateChallenge(headers=await open_rails.challenge(call.ctx, gate, rail_request)))


async def redeem(call: Call) -> Reply:
    """Verify and claim an open-rail credential presented at the seller's own gate."""
    b = call.input(RedeemCredential)
    resource_id = b.resource_id
    rail_request, credentials = _checked(call, b.method, b.url, b.headers)
    gate = await _gate(call, resource_id, b.url)
    if not gate.resource.active:
        raise ApiError(
            "resource_inactive",
            f"Resource {resource_id} is deactivated; it cannot be bought or used.",
        )
    try:
        redemption = await open_rails.claim(
            call.ctx, gate, rail_request, credentials, request_id=call.request_id
        )
    except open_rails.SettlementUnavailable as exc:
        raise settlement_unavailable(exc) from None
    return Reply(redemption.model())


async def settle(call: Call) -> Reply:
    """Settle a claimed credential whose answer succeeded."""
    b = call.input(SettleClaim)
    if b.units is not None and not 0 <= b.units <= MAX_UNITS:
        f = Fields.rules(call.body)
        f.error("units", f"must be a whole number from 0 to {MAX_UNITS}")
        f.done()
    try:
        redemption = await open_rails.settle(
            call.ctx,
            b.claim,
            seller_id=call.caller.seller_id,
            request_id=call.request_id,
            units=b.units,
        )
    except open_rails.HoldNotFound:
        raise _no_claim(b.claim) from None
    except open_rails.FixedPrice:
        problem = {"field": "units", "message": "the resource has a fixed price"}
        raise invalid([problem], code="invalid_rail_request") from None
    except open_rails.SettlementUnavailable as exc:
        raise settlement_unavailable(exc) from None
    return Reply(redemption.model())


async def release(call: Call) -> Reply:
    """Release a claimed credential whose answer failed: nothing is charged."""
    b = call.input(ReleaseClaim)
    if b.status is not None and not 100 <= b.status <= 599:
        f = Fields.rules(call.body)
        f.error("status", "must be the answer's HTTP status (100-599)")
        f.done()
    if b.reason == "answer_failed" and b.status is not None:
        message = f"the answer failed with status {b.status}; released, nothing charged"
    elif b.reason == "answer_failed":  # e.g. an MCP tool call answered with isError
        message = "the answer was an error result; released, nothing charged"
    else:
        message = "no answer came back; released, nothing charged"
    try:
        await open_rails.release(
            call.ctx,
            b.claim,
            seller_id=call.caller.seller_id,
            reason=b.reason,
            message=message,
            status=b.status,
            request_id=call.request_id,
        )
    except open_rails.HoldNotFound:
        raise _no_claim(b.claim) from None
    return Reply(GateRelease(released=True, claim=b.claim))


def _no_claim(claim: str) -> ApiError:
    return ApiError(
        "not_found",
        f"No such claim {claim}: unknown, or already settled, released or expired.",
    )


# --- reading the body -----------------------------------------------------------------------


def _checked(
    call: Call, method: str, url: str, headers: dict[str, Any] | None = None
) -> tuple[RailRequest, dict[str, str]]:
    """``(the request, its credentials)`` from a body read by its shape, or 400
    ``invalid_rail_request`` listing every problem (the route's code for a bad body)."""
    f = Fields.rules(call.body)
    if not _absolute(url):
        f.error("url", "must be the absolute http(s) URL the client addressed, query included")
    credentials = {} if headers is None else _credentials(headers, f.error)
    if f.errors:
        raise invalid(f.errors, "invalid_rail_request")
    return RailRequest(method.upper(), url), credentials


def _absolute(url: str) -> bool:
    if len(url) > _MAX_URL or not url.isascii() or any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _credentials(value: dict[str, Any], bad: Callable[[str, str], None]) -> dict[str, str]:
    """The credential headers: ``PAYMENT-SIGNATURE`` and/or ``Authorization: Payment …``,
    any case, and nothing else (the seller's app forwards no other header)."""
    if not value:
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


async def _gate(call: Call, resource_id: str, url: str) -> open_rails.Gate:
    """The seller's own resource (another seller's id is as unknown as a made-up one),
    sold at ``url``, which must be one of the seller's own (:mod:`.gate_origins`: the
    first of the seller's gates to ask there claims an origin nobody holds yet)."""
    ctx: ServerContext = call.ctx
    public_url = call.public_url
    realm = urlsplit(public_url).netloc

    def load() -> open_rails.Gate | None:
        with ctx.db.read() as conn:
            gate = open_rails.load_gate(
                conn, resource_id, realm=realm, seller_id=call.caller.seller_id
            )
            if gate is None:
                return None
            held = gate_origins.check_url(
                conn, url=url, public_url=public_url, resource=gate.resource, seller=gate.seller
            )
        if not held:
            with ctx.db.write() as conn:
                gate_origins.claim_origin(conn, url=url, seller=gate.seller, now=ctx.now())
        return gate

    gate = await anyio.to_thread.run_sync(load)
    if gate is None:
        raise ApiError("not_found", "No such resource.")
    return gate


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/gates/challenge",
        handler=challenge,
        run=Flow(),
        auth=Role.SELLER,
        body=RequestChallenge,
        sdk=Sdk(
            "gates.challenge",
            "resource_id: str, *, method: str, url: str",
            doc="""The 402's challenge headers for ``method`` ``url`` (absolute, as the client
            addressed it); empty while the seller has not enabled payments.""",
            build="gate_challenge_body",
        ),
        contract=Contract(
            invalid_body="invalid_rail_request",
            response=GateChallenge,
            errors=("not_found", "url_not_owned"),
            summary="Open-rail challenge (x402 PAYMENT-REQUIRED, MPP WWW-Authenticate) for an "
            "unpaid request {resource_id, method, url} to the seller's own gate; empty until "
            "payments are enabled.",
        ),
    ),
    Endpoint(
        method="POST",
        path="/gates/redeem",
        handler=redeem,
        run=Flow(),
        auth=Role.SELLER,
        body=RedeemCredential,
        sdk=Sdk(
            "gates.redeem",
            "resource_id: str, *, method: str, url: str, headers: Mapping[str, str]",
            doc="""Verify the credential in ``headers`` (only ``PAYMENT-SIGNATURE`` and
            ``Authorization: Payment …`` are sent) for the request ``method`` ``url`` and claim
            it: a verified one comes back with ``claim`` set, nothing moved yet.""",
            build="gate_redeem_body",
        ),
        contract=Contract(
            invalid_body="invalid_rail_request",
            response=GateRedemption,
            errors=("not_found", "url_not_owned", "resource_inactive", "settlement_unavailable"),
            summary="Verify an x402 PAYMENT-SIGNATURE or MPP Authorization: Payment credential "
            "{resource_id, method, url, headers} presented at the seller's own gate and claim "
            "it (nothing moves): settle the claim once the answer succeeded, or release it.",
        ),
    ),
    Endpoint(
        method="POST",
        path="/gates/settle",
        handler=settle,
        run=Flow(),
        auth=Role.SELLER,
        body=SettleClaim,
        sdk=Sdk(
            "gates.settle",
            "claim: str, units: int | None = None",
            doc="""Settle a claim whose answer succeeded: ``paid`` with the receipt and the paid
            answer's headers, or refused (nothing moved: withhold the answer, answer 402).
            ``units``: what the answer used of a metered resource paid with x402 ``upto``
            (``units * unit_price``, at most its ``max_amount``; omitted, the maximum); ``0``
            releases the claim, nothing charged: ``paid`` false, ``reason`` ``released``.""",
            build="gate_settle_body",
        ),
        contract=Contract(
            response=GateRedemption,
            errors=("not_found", "invalid_rail_request", "settlement_unavailable"),
            summary="Settle a claimed open-rail credential {claim} whose answer succeeded "
            "(status below 400): paid with the receipt headers, or refused (nothing moved; "
            "withhold the answer and answer 402).  ``units`` settles a metered ``upto`` "
            "claim at what they cost (capped at the maximum; omitted: the maximum); ``0`` "
            "releases it with nothing charged (``paid`` false, ``reason`` ``released``); "
            "units for a fixed-price resource: 400 ``invalid_rail_request``.",
        ),
    ),
    Endpoint(
        method="POST",
        path="/gates/release",
        handler=release,
        run=Flow(),
        auth=Role.SELLER,
        body=ReleaseClaim,
        sdk=Sdk(
            "gates.release",
            "claim: str, *, status: int | None = None, reason: str = 'answer_failed'",
            doc="""Release a claim whose answer failed (``status``) or never came
            (``reason="answer_missing"``): nothing is charged.""",
            build="gate_release_body",
        ),
        contract=Contract(
            response=GateRelease,
            errors=("not_found",),
            summary="Release a claimed open-rail credential {claim, reason, status} whose "
            "answer failed or never came: nothing is charged, payment.failed records why.",
        ),
    ),
]

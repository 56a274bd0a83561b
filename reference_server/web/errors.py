"""Errors in the spec's envelope, with stable codes -- and the one mapping to HTTP.

A route raises :class:`ApiError` with one of the codes in :data:`CODES` (the table of
``docs/errors.md``; a test checks that the two agree); the code decides the HTTP status, so
the same failure always has the same status everywhere.  :func:`http_error` is the one
place a domain error (:class:`~reference_server.domain.errors.DomainError`, same codes)
becomes an HTTP one.

Why ``ApiError`` subclasses ``DomainError`` rather than standing beside it: both are "a
refusal with a stable code" answered in one envelope, and a request may meet either (a
bad header from the HTTP layer, a policy refusal from the domain).  As a subclass, every
pipeline catches the one type ``DomainError`` and answers through :func:`http_error`,
which passes an ``ApiError`` through as it is -- so no catch site can handle one kind and
forget the other.  ``ApiError`` adds only what HTTP needs: the status (looked up, never
chosen) and extra headers.
"""

from __future__ import annotations

import logging
from typing import Any

from ..domain.errors import DomainError

__all__ = ["CODES", "ApiError", "envelope", "http_error", "invalid", "settlement_unavailable"]

log = logging.getLogger("reference_server")

#: code -> (status, meaning).  Add codes here, never invent them at a raise site.
CODES: dict[str, tuple[int, str]] = {
    "bad_request": (400, "The request could not be read."),
    "invalid_json": (
        400,
        "The body is not valid JSON, not a JSON object, or holds a number out of range.",
    ),
    "duplicate_json_key": (400, "An object in the body repeats a key; send each key once."),
    "duplicate_header": (
        400,
        "A header that names a credential, environment, key or payment is sent twice.",
    ),
    "invalid_header": (
        400,
        "A header holds a control character, or a credential header is not printable ASCII.",
    ),
    "invalid_path": (400, "The path holds a control character or is not UTF-8."),
    "invalid_signature": (
        400,
        "POST /processor/webhooks: the Stripe-Signature does not verify, or is too old.",
    ),
    "invalid_environment": (400, "X-Svc-Environment is neither `test` nor `live`."),
    "idempotency_key_required": (400, "This route needs an Idempotency-Key header."),
    "invalid_idempotency_key": (
        400,
        "The Idempotency-Key is not 1 to 255 printable ASCII characters.",
    ),
    "invalid_rail_request": (
        400,
        "A /gates/challenge or /gates/redeem body is unusable (method, absolute URL, credential), "
        "or /gates/settle reports units for a fixed-price resource.",
    ),
    "unauthenticated": (401, "No credential was sent."),
    "invalid_credential": (401, "The credential is malformed, unknown, expired or revoked."),
    "payment_required": (402, "Pay for this resource first."),
    "insufficient_funds": (402, "The balance is too low for this payment; fund the wallet key."),
    "max_per_tx_exceeded": (402, "The payment is above the wallet key's max_per_tx."),
    "allowance_exceeded": (402, "The payment would pass the allowance of this period."),
    "budget_exceeded": (402, "The payment would pass the wallet key's total budget."),
    "rail_not_allowed": (402, "The wallet key's policy does not allow this rail."),
    "host_not_allowed": (402, "The wallet key's policy does not allow this host."),
    "approval_declined": (
        402,
        "A person declined this payment (its approval); nothing was paid and the hold is released.",
    ),
    "approval_expired": (
        402,
        "This payment's approval expired before it was decided or used; nothing was paid and "
        "the hold is released.",
    ),
    "approval_amount_exceeded": (
        402,
        "The URL now asks more than the amount a person approved; nothing was paid.",
    ),
    "forbidden": (403, "The credential is valid but has no rights here."),
    "wrong_credential": (403, "The route needs a credential of another role."),
    "url_not_owned": (
        403,
        "A gate asked to charge for a URL that is not its seller's (another account's origin, "
        "or another resource's hosted gate).",
    ),
    "environment_mismatch": (403, "X-Svc-Environment disagrees with the key's environment."),
    "signup_disabled": (403, "Sign-up through POST /owners is disabled on this server."),
    "not_found": (404, "No such route, or no such object that you can see."),
    "sandbox_test_only": (404, "The sandbox exists only in the test environment, not in live."),
    "method_not_allowed": (405, "The route exists but not with this method."),
    "request_timeout": (408, "The request body did not arrive in time; the connection is closed."),
    "conflict": (409, "The request conflicts with the current state."),
    "email_taken": (409, "An owner with this email exists."),
    "handle_taken": (409, "Another owner holds this handle in this environment."),
    "resource_inactive": (409, "The resource is deactivated and cannot be paid."),
    "wallet_key_revoked": (409, "The wallet key is revoked."),
    "receipt_not_authorized": (
        409,
        "The receipt holds no authorization to capture: it was captured, released or is not "
        "a metered payment.",
    ),
    "refund_exceeds_payment": (
        409,
        "The refund is more than what is left of the payment (its amount less its refunds).",
    ),
    "payment_not_settled": (
        409,
        "The payment is not settled (a metered authorization held or released): nothing to refund.",
    ),
    "insufficient_balance": (
        409,
        "The seller's available balance is below the refund; nothing was refunded (add "
        "balance or refund less).",
    ),
    "refund_not_custodial": (
        409,
        "The payment was settled direct_wallet: the money never passed through the service; "
        "the seller refunds from its own wallet.",
    ),
    "refund_unsupported_rail": (
        409,
        "Refunds of this payment's rail are not available (every rail the service settles is "
        "refundable; direct_wallet answers refund_not_custodial).",
    ),
    "resource_metered": (
        409,
        "The resource is priced by use and has no fixed fallback price for this rail.",
    ),
    "payouts_not_enabled": (
        409,
        "Payouts are not enabled for this seller yet: finish Connect onboarding and sync; "
        "GET /sellers/me/balance shows payouts_enabled.",
    ),
    "idempotency_in_progress": (409, "A request with this Idempotency-Key is still running."),
    "payload_too_large": (413, "The body is larger than the server accepts."),
    "unsupported_media_type": (415, "Bodies must be sent as application/json."),
    "validation_error": (422, "A field is missing or invalid; see details.errors."),
    "idempotency_key_reused": (422, "The Idempotency-Key was used with a different request."),
    "url_not_allowed": (422, "pay-url may not request this URL (SSRF rules); nothing was paid."),
    "not_payable": (422, "The URL did not answer 402 Payment Required; nothing was paid."),
    "unsupported_challenge": (
        422,
        "The URL's 402 offers no x402/MPP challenge this environment pays; nothing was paid.",
    ),
    "rate_limited": (429, "Too many requests; wait Retry-After seconds."),
    "headers_too_large": (
        431,
        "The request line and headers are larger than the server reads; the connection is closed.",
    ),
    "internal_error": (500, "The server failed; the request may be retried."),
    "upstream_refused": (
        502,
        "The upstream refused: a gate's upstream URL is not allowed (SSRF rules), or a "
        "pay-url target was sent the payment and did not settle it (cancelled, not charged).",
    ),
    "upstream_failed": (
        502,
        "pay-url: the paid URL answered an error and did not settle (cancelled, not "
        "charged); details carry its status and the start of its body.",
    ),
    "upstream_unavailable": (502, "The resource's upstream did not answer."),
    "upstream_too_large": (502, "The resource's upstream answered with too large a body."),
    "payment_unconfirmed": (
        502,
        "Live pay-url: the URL did not confirm the payment; the amount stays reserved.",
    ),
    "processor_refused": (
        502,
        "The payment processor refused the call; details.processor_code carries its code.",
    ),
    "processor_unavailable": (
        503,
        "The payment processor could not be reached or is failing; nothing changed, retry.",
    ),
    "not_ready": (503, "A dependency (the database) is not reachable."),
    "payment_service_unavailable": (503, "A gate could not reach the payment service."),
    "gate_misconfigured": (503, "A gate's seller key or resource ids are wrong."),
    "rails_not_configured": (503, "Live pay-url needs a hot wallet this server is not given."),
    "payouts_unavailable": (503, "Live payouts need a payout processor this server is not given."),
    "top_ups_unavailable": (
        503,
        "Live top-ups need a facilitator and a deposit address (crypto) or the card "
        "processor (card) this server is not given.",
    ),
    "settlement_unavailable": (
        503,
        "An open-rail payment could not be settled now, or the card processor not reached; "
        "do not pay again, retry shortly.",
    ),
}


class ApiError(DomainError):
    """An error response.  ``status`` follows from ``code``; ``headers`` are added to it."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if code not in CODES:
            raise ValueError(f"undocumented error code {code!r}")
        super().__init__(code, message, details=details)
        self.status = CODES[code][0]
        self.headers = headers or {}

    def body(self, request_id: str) -> dict[str, Any]:
        return envelope(self.code, self.message, request_id, self.details)


def invalid(errors: list[dict[str, str]], code: str = "validation_error") -> ApiError:
    """The one refusal of a request with bad fields: every problem, per field."""
    summary = "; ".join(f"{e['field']} {e['message']}" for e in errors)
    return ApiError(code, f"Invalid request: {summary}.", details={"errors": errors})


def settlement_unavailable(exc: Exception) -> ApiError:
    """An open-rail payment whose settlement did not answer: the payer must not pay again."""
    return ApiError(
        "settlement_unavailable",
        f"The payment could not be settled now ({exc}); do not pay again, retry shortly.",
        headers={"Retry-After": "5"},
    )


def http_error(error: DomainError) -> ApiError:
    """``error`` as it is answered: an :class:`ApiError` as it is, a domain error with the
    status of its code and ``Retry-After`` from ``retry_after_seconds``.  A code missing
    from :data:`CODES` is a bug at the raise site: it is logged and answered as a 500."""
    if isinstance(error, ApiError):
        return error
    if error.code not in CODES:
        log.error("undocumented error code %r raised: %r", error.code, error)
        return ApiError("internal_error", "The server failed; the request may be retried.")
    headers = {}
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    return ApiError(error.code, error.message, details=error.details, headers=headers)


def envelope(
    code: str, message: str, request_id: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return {"ok": False, "error": error, "request_id": request_id}

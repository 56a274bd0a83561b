"""The one error tree of the SDK.

Every exception the SDK raises on purpose derives from :class:`SvcError`, so callers can
catch the whole family with one clause and still branch on the precise subclass.  Errors
that come from an HTTP response carry what the service said (``status``, ``code``,
``message``, ``details``) and the ``request_id`` to quote to support; a response whose
body is not the service's JSON envelope (a proxy's HTML page, say) still maps into the
same classes, with ``code`` derived from the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "ApprovalRequired",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ConflictError",
    "NotFoundError",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "SvcError",
    "UnprocessableEntityError",
    "WebhookVerificationError",
    "error_for_status",
]


class SvcError(Exception):
    """Root of every error raised by the ``svc`` package.

    ``request_id`` is the service's id for the request that failed, to quote to support;
    ``None`` where there is none (no response arrived, or the error is local: a
    configuration mistake, a webhook that failed verification), so a handler catching
    ``SvcError`` can always read it.
    """

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class ApprovalRequired(SvcError):
    """202: the payment was not made; it waits for a person's approval.

    ``approval`` is the :class:`~svc.Approval`: show its ``approval_url`` to a person,
    then repeat the call with the same ``Idempotency-Key`` (``RequestOptions``) once it is
    approved, or wait for the decision with ``client.wait_for_approval(approval.id)``.
    """

    def __init__(
        self, message: str, *, approval: Any = None, request_id: str | None = None
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.approval = approval

    @classmethod
    def waiting(cls, approval: Any) -> ApprovalRequired:
        """The error for a 202 that answered ``approval``."""
        return cls(
            f"This payment of {approval.amount} {approval.currency} waits for a person's "
            f"approval ({approval.id}): open {approval.approval_url}",
            approval=approval,
            request_id=approval.request_id,
        )


class ConfigurationError(SvcError):
    """The client was asked to do something its configuration cannot support.

    Raised before any request is sent, e.g. a seller route called on a client that holds
    no seller key; then ``missing_credential`` is that role's word (``"seller"``), so a
    caller such as the ``svc`` command can say it in its own terms.
    """

    missing_credential: str | None = None


class WebhookVerificationError(SvcError):
    """A webhook delivery failed verification; treat the request as not from the service."""


class APIConnectionError(SvcError):
    """The request never produced an HTTP response (DNS, refused connection, reset...)."""

    status: int | None = None
    code = "connection_error"
    details: Mapping[str, Any] | None = None


class APITimeoutError(APIConnectionError):
    """The request timed out before a full response arrived."""

    code = "timeout"


class APIError(SvcError):
    """The service answered with an error status.

    Attributes mirror the spec's error envelope: ``{"ok": false, "error": {"code",
    "message", "details"}, "request_id"}``.
    """

    default_code = "api_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.status = status
        self.code = code or self.default_code
        self.details = details
        self.headers: Mapping[str, str] = dict(headers or {})
        self.body = body

    def __str__(self) -> str:
        rid = f" (request_id={self.request_id})" if self.request_id else ""
        return f"{self.status} {self.code}: {self.message}{rid}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )


class BadRequestError(APIError):
    """400: the request could not be read (malformed JSON, wrong content type...)."""

    default_code = "bad_request"


class AuthenticationError(APIError):
    """401: no credential, or one the service does not recognise."""

    default_code = "unauthenticated"


class PaymentRequiredError(APIError):
    """402: a payment or a spend limit refused the operation."""

    default_code = "payment_required"


class PermissionDeniedError(APIError):
    """403: a valid credential without rights here, or for the other environment."""

    default_code = "forbidden"


class NotFoundError(APIError):
    """404: unknown, or not yours (the service never says which)."""

    default_code = "not_found"


class ConflictError(APIError):
    """409: e.g. the same idempotency key is still being processed."""

    default_code = "conflict"


class UnprocessableEntityError(APIError):
    """422: a field failed validation, or an idempotency key was reused with another body."""

    default_code = "unprocessable"


class RateLimitError(APIError):
    """429: slow down; ``retry_after`` says for how many seconds, when the service said."""

    default_code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the service failed; retried automatically before it reaches you."""

    default_code = "server_error"


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: PaymentRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def error_for_status(status: int) -> type[APIError]:
    """The exception class for an HTTP error status (unlisted 4xx map to the base class)."""
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, APIError)

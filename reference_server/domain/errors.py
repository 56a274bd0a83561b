"""The domain's own errors: a stable code, a message, details -- and nothing of HTTP.

Business rules (``domain/``, pay-url included, ``outbox/`` ...) refuse with :class:`DomainError`
and never name a status or a header: what a refusal *means* lives here, how it is said on
the wire lives in the HTTP layer (``reference_server.web.errors.http_error``, the one
mapping, whose ``CODES`` table gives each code its status; docs/errors.md lists the same
codes).  A code is one of that table's keys; a test reads every raise site under the
domain packages and checks it.

Two things a caller does decide on, so they are data here rather than HTTP:

* :class:`PaymentRefused` -- the payer's wallet key or balance does not allow the payment
  (a 402 on the wire).  ``POST /pay`` and ``pay-url`` record ``payment.failed`` for these
  and for no other error, so they tell them apart by kind, not by status.
* ``retry_after_seconds`` -- "the same request will work shortly" (an attempt still in
  flight, a delivery being sent): the mapping says it as a ``Retry-After`` header.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DomainError", "PaymentRefused"]


class DomainError(Exception):
    """A refusal with a stable ``code`` (docs/errors.md), a human ``message`` and optional
    ``details`` for the client to act on."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        #: Seconds after which the same request may succeed, if that is known.
        self.retry_after_seconds = retry_after_seconds

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class PaymentRefused(DomainError):
    """The payment is not allowed: balance, policy limit, rail or host.  Nothing moved."""

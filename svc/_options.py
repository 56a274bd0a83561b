"""Per-request options, merged over the client's defaults.

A client is configured once (credentials, environment, timeout, retries); a single call
sometimes needs something else: its own idempotency key so a retry after a crash replays
the stored response, the Test environment for one webhook, another seller's key.  Rather
than a second client, the call takes ``options=RequestOptions(...)``; every field left
``None`` falls back to the client's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs
import httpx

from ._retry import check_max_retries

__all__ = ["Environment", "RequestOptions", "Timeout"]

#: The two money environments; they never share keys, money or webhooks.
Environment = Literal["test", "live"]
#: Seconds (applied to connect, read, write and pool) or an :class:`httpx.Timeout`.
Timeout = float | httpx.Timeout


def _secret_repr(value: str | None) -> str:
    """Keep credentials out of reprs, and so out of logs and tracebacks."""
    return "None" if value is None else "'***'"


@attrs.frozen(kw_only=True)
class RequestOptions:
    """Options for one call; ``None`` means "use the client's setting".

    ``idempotency_key`` replaces the key the client would generate for a mutating call;
    reuse the same key when you repeat a call after not knowing whether it succeeded.
    ``extra_headers`` are sent last, so they can override anything the client sets.
    """

    idempotency_key: str | None = None
    timeout: Timeout | None = None
    max_retries: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_max_retries)
    )
    environment: Environment | None = None
    owner_jwt: str | None = attrs.field(default=None, repr=_secret_repr)
    seller_key: str | None = attrs.field(default=None, repr=_secret_repr)
    wallet_key: str | None = attrs.field(default=None, repr=_secret_repr)
    extra_headers: Mapping[str, str] | None = None

    def merged_over(self, defaults: RequestOptions) -> RequestOptions:
        """These options with every unset field taken from ``defaults``.

        Extra headers are combined rather than replaced, so a per-call header does not
        silently drop the client's default ones.
        """
        inherited = {
            field.name: getattr(defaults, field.name)
            for field in attrs.fields(RequestOptions)
            if getattr(self, field.name) is None
        }
        headers = {**(defaults.extra_headers or {}), **(self.extra_headers or {})}
        inherited["extra_headers"] = headers or None
        return attrs.evolve(self, **inherited)

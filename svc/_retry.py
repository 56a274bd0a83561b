"""When a failed call is tried again, and after how long.

Retrying is safe because every mutating call carries an ``Idempotency-Key`` that stays
the same across its retries: the service replays the first result instead of charging
twice.  So the policy retries what is likely to be transient -- the network, a request
still in flight under the same key (409 ``idempotency_in_progress``), rate limits and
gateway/server failures -- and never what would fail the same way again (400, 401, 403,
404, 422...).

The policy is pure (no I/O, no clock except through ``Retry-After`` dates), so the sync
and async clients share it and tests drive it with a fixed ``random``.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import attrs
import httpx

from ._errors import APIError

__all__ = ["DEFAULT_MAX_RETRIES", "RetryPolicy", "parse_retry_after"]

DEFAULT_MAX_RETRIES = 2

#: 5xx statuses that mean "the service or a gateway in front of it had a bad moment".
RETRY_STATUSES = frozenset({500, 502, 503, 504})
#: The one 409 worth waiting for: the same key's first request has not finished yet.
IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"


def check_max_retries(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
    """The attrs validator of every ``max_retries``: a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("max_retries must be a non-negative integer")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Capped exponential backoff with jitter, honouring ``Retry-After``.

    The n-th retry (n from 0) waits ``min(initial_delay * 2**n, max_delay)`` scaled by a
    random factor in [0.5, 1.0]: jitter keeps many clients that failed together from
    coming back together.  A ``Retry-After`` the service sent wins over the backoff, up to
    ``max_retry_after`` seconds so one response cannot park a caller for an hour.
    """

    max_retries: int = attrs.field(default=DEFAULT_MAX_RETRIES, validator=check_max_retries)
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    random: Callable[[], float] = _random.random

    def is_retryable(self, failure: BaseException) -> bool:
        """Whether trying the same request again may succeed."""
        if isinstance(failure, APIError):
            if failure.status == 409:
                return failure.code == IDEMPOTENCY_IN_PROGRESS
            return failure.status == 429 or failure.status in RETRY_STATUSES
        # A scheme httpx cannot speak is a configuration mistake, not a network blip.
        return isinstance(failure, httpx.TransportError) and not isinstance(
            failure, httpx.UnsupportedProtocol
        )

    def next_delay(self, retries_done: int, failure: BaseException) -> float | None:
        """Seconds to wait before the next try, or ``None`` to give up and raise.

        ``failure`` is the :class:`~svc.APIError` built from an error response, or the
        httpx exception of a request that never got one.
        """
        if retries_done >= self.max_retries or not self.is_retryable(failure):
            return None
        if isinstance(failure, APIError):
            retry_after = parse_retry_after(failure.headers)
            if retry_after is not None:
                return min(retry_after, self.max_retry_after)
        return self.backoff(retries_done)

    def backoff(self, retries_done: int) -> float:
        """The jittered delay before retry number ``retries_done + 1``."""
        base = min(self.initial_delay * 2.0**retries_done, self.max_delay)
        return base * (0.5 + 0.5 * self.random())


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), if usable."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
        return max(seconds, 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds

"""Prometheus metrics (``GET /metrics``, docs/operations.md "Metrics").

Two kinds, each from where it is true.  What the service *did* in a process (requests
and their latency, rate-limit refusals, webhook attempts, pay-url upstream latency) is
counted in that process (:mod:`._traffic`); with ``PROMETHEUS_MULTIPROC_DIR`` set, as the
library's multi-process mode asks, every ``svc-server run`` and ``worker`` process of a
host writes there and any one of them answers for all.  What the books *say* (payments by
rail, settlement and status with their amounts, pay-url attempts, the webhook outbox's
backlog, withdrawals, approvals pending, the last reconciliation's drift) is read from the
database at scrape time (:mod:`._books`): the same from every process, and unchanged by a
restart.
"""

from __future__ import annotations

from ._render import CONTENT_TYPE, render
from ._traffic import observe_request, observe_upstream, rate_limited, webhook_attempt

__all__ = [
    "CONTENT_TYPE",
    "observe_request",
    "observe_upstream",
    "rate_limited",
    "render",
    "webhook_attempt",
]

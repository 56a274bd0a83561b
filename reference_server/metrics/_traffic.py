"""What one process did, counted as it happens (see the package)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["REGISTRY", "observe_request", "observe_upstream", "rate_limited", "webhook_attempt"]

#: This module's families, apart from any the host application registers globally.
REGISTRY = CollectorRegistry(auto_describe=True)

#: Seconds: an API answer is milliseconds, a pay-url's upstream or a stream seconds.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_REQUESTS = Counter(
    "svc_http_requests",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
_LATENCY = Histogram(
    "svc_http_request_duration_seconds",
    "Time from a request's arrival to its answer's last byte, by route template and method.",
    ["route", "method"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
_RATE_LIMITED = Counter(
    "svc_rate_limited",
    "Requests refused 429 by a rate limit, by the limit's name.",
    ["limit"],
    registry=REGISTRY,
)
_WEBHOOK_ATTEMPTS = Counter(
    "svc_webhook_deliveries",
    "Webhook delivery attempts, by outcome (succeeded, retrying, failed).",
    ["outcome"],
    registry=REGISTRY,
)
_UPSTREAM = Histogram(
    "svc_pay_url_upstream_seconds",
    "pay-url's requests to the URL paid for (the probe and the paid one), by outcome.",
    ["outcome"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    _REQUESTS.labels(route, method, str(status)).inc()
    _LATENCY.labels(route, method).observe(seconds)


def rate_limited(limit: str) -> None:
    _RATE_LIMITED.labels(limit).inc()


def webhook_attempt(outcome: str) -> None:
    _WEBHOOK_ATTEMPTS.labels(outcome).inc()


def observe_upstream(outcome: str, seconds: float) -> None:
    _UPSTREAM.labels(outcome).observe(seconds)

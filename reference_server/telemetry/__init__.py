"""Traces and logs: what an operator follows one request by (docs/observability.md).

Tracing is the ``otel`` extra's (``pip install 'svc-payments[otel]'``): with
``SVC_TRACING=true`` each request is one trace (the server span, the database's
statements, every outbound call: webhooks, pay-url upstreams, the facilitator, the payment
processor) and each webhook the worker sends another, every span carrying the request id
it belongs to (a delivery's names the request that caused its event).
Without the extra, :func:`span` costs nothing.  Logs are JSON lines with
``SVC_LOG_FORMAT=json``: one per request with its id, route, status, duration and the
kind of credential (never the credential).
"""

from __future__ import annotations

from ._facilitator import facilitator_client
from ._logs import configure_logging, log_request
from ._tracing import (
    REQUEST_ID,
    TracingUnavailable,
    annotate,
    current_traceparent,
    failed,
    name_request_span,
    span,
    start_tracing,
    tracing_middleware,
)

__all__ = [
    "REQUEST_ID",
    "TracingUnavailable",
    "annotate",
    "configure_logging",
    "current_traceparent",
    "facilitator_client",
    "failed",
    "log_request",
    "name_request_span",
    "span",
    "start_tracing",
    "tracing_middleware",
]

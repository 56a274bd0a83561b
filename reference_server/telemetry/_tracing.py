"""OpenTelemetry, when the ``otel`` extra is installed (see the package)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from ..store import Database

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
except ImportError:  # the extra is not installed: spans are no-ops
    trace = None  # type: ignore[assignment]

__all__ = [
    "REQUEST_ID",
    "TracingUnavailable",
    "annotate",
    "current_traceparent",
    "failed",
    "name_request_span",
    "span",
    "start_tracing",
    "tracing_middleware",
]

#: The request being served (set by the request id middleware), for every span and log
#: line made while it is; worker threads get it with the rest of the context.
REQUEST_ID: ContextVar[str | None] = ContextVar("svc_request_id", default=None)
_TRACER = "reference_server"
_STATEMENTS = "opentelemetry.instrumentation.sqlalchemy"
#: The tracer providers that put request ids on their spans already (each gets one).
_NAMING: set[int] = set()


class TracingUnavailable(RuntimeError):
    """``SVC_TRACING=true`` without the ``otel`` extra installed."""


@contextlib.contextmanager
def span(name: str, *, link: str | None = None, **attributes: Any) -> Iterator[None]:
    """A span around a piece of work: a no-op unless this process traces
    (:func:`start_tracing`), whatever tracer provider a host application set.  ``link``:
    a W3C ``traceparent`` (:func:`current_traceparent`) of the work that caused this one,
    linked to, so a worker's trace leads back to the request's."""
    if trace is None or not _NAMING:
        yield
        return
    values = {k: v for k, v in attributes.items() if v is not None}
    links = [] if link is None else _links(link)
    with trace.get_tracer(_TRACER).start_as_current_span(name, attributes=values, links=links):
        yield


def annotate(**attributes: Any) -> None:
    """Attributes learnt during the current span's work (an answer's status), on it."""
    if trace is None or not _NAMING:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def failed(description: str) -> None:
    """The current span's call failed without raising (an error status answered)."""
    if trace is None or not _NAMING:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.set_status(trace.Status(trace.StatusCode.ERROR, description))


def current_traceparent() -> str | None:
    """The current span as a W3C ``traceparent`` (55 characters), to store with work done
    later elsewhere (an event's deliveries); ``None`` when nothing is traced."""
    if trace is None or not _NAMING:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    flags = int(context.trace_flags)
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"


def _links(traceparent: str) -> list[Any]:
    """The span link a stored ``traceparent`` names (none if it is not one)."""
    parts = traceparent.split("-")
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except (IndexError, ValueError):
        return []
    if len(parts) != 4 or not trace_id or not span_id:
        return []
    linked = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
    )
    return [trace.Link(linked)]


if trace is not None:

    class _RequestIdOnEverySpan(SpanProcessor):
        """Puts the request id on each span as it starts (``svc.request_id``)."""

        def on_start(self, span: Any, parent_context: otel_context.Context | None = None) -> None:
            request_id = REQUEST_ID.get()
            if request_id is not None:
                span.set_attribute("svc.request_id", request_id)

        def on_end(self, span: ReadableSpan) -> None:
            pass


def start_tracing(db: Database) -> Any:
    """The process's tracer provider, putting the request id on every span, with the
    database's engine instrumented: the global provider (configured by the operator or
    ``opentelemetry-instrument``), or one made here from the ``OTEL_*`` variables when
    nothing configured one."""
    if trace is None:
        raise TracingUnavailable(
            "SVC_TRACING=true needs the otel extra: pip install 'svc-payments[otel]'"
        )
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = _provider_from_environment()
    if id(provider) not in _NAMING:
        provider.add_span_processor(_RequestIdOnEverySpan())
        _NAMING.add(id(provider))
    # This engine's statements only: the instrumentor's instrument() would also wrap
    # create_engine for the whole process (and it declares a range below SQLAlchemy 2.1,
    # whose engine events its tracer uses unchanged).
    from opentelemetry import metrics as otel_metrics

    usage = otel_metrics.get_meter(_STATEMENTS).create_up_down_counter(
        "db.client.connections.usage", unit="connections", description="Connections in use."
    )
    EngineTracer(  # type: ignore[no-untyped-call]
        provider.get_tracer(_STATEMENTS), db.engine, connections_usage=usage
    )
    return provider


def tracing_middleware(db: Database) -> Callable[[Any], Any]:
    """What wraps the app in OpenTelemetry's ASGI middleware (:func:`start_tracing`)."""
    provider = start_tracing(db)
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    def wrap(app: Any) -> Any:
        return OpenTelemetryMiddleware(
            app, tracer_provider=provider, exclude_spans=["receive", "send"]
        )

    return wrap


def name_request_span(method: str, route: str) -> None:
    """The server span named by the route's template (the middleware only knew the path)."""
    if trace is None:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.update_name(f"{method} {route}")
        current.set_attribute("http.route", route)


def _provider_from_environment() -> Any:
    """An SDK provider exporting over OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``, default
    ``http://localhost:4318``), set as the process's."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider

"""JSON log lines (``SVC_LOG_FORMAT=json``): every record of the process as one JSON
object, and one record per request in place of uvicorn's access line (see the package)."""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

from ._tracing import REQUEST_ID

__all__ = ["configure_logging", "log_request"]

#: The per-request records' logger (``SVC_LOG_FORMAT=json`` only).
REQUESTS = logging.getLogger("reference_server.requests")
_LOGGERS = ("", "uvicorn", "uvicorn.error", "reference_server")


class _WithRequestId(logging.Filter):
    """Every record made while a request is served names it (``request_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        return True


def configure_logging(log_format: str) -> None:
    """JSON lines on stderr for every logger of the process, and the request log on in
    place of uvicorn's access log; ``text`` leaves logging as uvicorn set it."""
    if log_format != "json":
        REQUESTS.disabled = True
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter(
            "{asctime}{levelname}{name}{message}",
            style="{",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        )
    )
    handler.addFilter(_WithRequestId())
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler] if name == "" else []
        logger.propagate = name != ""
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("uvicorn.access").disabled = True
    REQUESTS.disabled = False


def log_request(
    *, request_id: str | None, route: str, method: str, status: int, seconds: float, credential: str
) -> None:
    """One served request: never its path's values or its credential, only their kinds."""
    if REQUESTS.disabled or not REQUESTS.isEnabledFor(logging.INFO):
        return
    REQUESTS.info(
        "%s %s %d",
        method,
        route,
        status,
        extra={
            "request_id": request_id,
            "route": route,
            "method": method,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
            "credential": credential,
        },
    )

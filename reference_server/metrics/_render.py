"""One scrape: this process's (or, in multi-process mode, every process's) traffic and
the books, in Prometheus' text format."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ..store import Database
from ._books import Books
from ._traffic import REGISTRY

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _ThisProcess(Collector):
    """The traffic families as counted in this process (no multi-process directory)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def render(db: Database, now: datetime) -> bytes:
    """The text of one scrape (blocking: it reads the database)."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ThisProcess())
    registry.register(Books(db, now))
    return generate_latest(registry)

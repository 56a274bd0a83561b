"""A hosted gate relaying a streamed answer (``text/event-stream``) as it arrives.

The upstream's answer is handed to the payer chunk by chunk, never buffered, through the
same :func:`svc_asgi.serve_held` a seller's own ``svc_asgi`` gate serves with: a held
payment is settled after the last chunk (with the units used, for a metered resource),
the ``svc-receipt`` event closes the stream, and a payer who leaves is charged what was
used up to then.

The upstream reports its usage with an ``X-Svc-Usage`` header (a total known up front)
and, since a stream learns its usage as it goes, with ``svc-usage`` events
(``event: svc-usage`` / ``data: <units>``), each adding its units; the gate consumes both
and the payer sees neither.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack

import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from svc_asgi import USAGE_EXTENSION, GateCore, Paid, Route, serve_held

from ... import outbound

__all__ = ["RelayedAnswer", "is_event_stream"]

log = logging.getLogger("reference_server.gates")

_USAGE_EVENT = b"event: svc-usage"
#: The pipeline's framing headers: the relayed answer sets its own.
_FRAMING = (b"content-length", b"content-type")


def is_event_stream(headers: httpx.Headers) -> bool:
    value: str = headers.get("content-type", "")
    return value.lower().startswith("text/event-stream")


class UsageEvents:
    """Takes ``svc-usage`` events out of an event stream, adding their units with
    ``report``; every other event passes through as soon as it is whole (only a
    partial event at the end of a chunk waits for the next one)."""

    def __init__(self, report: Callable[[int], None] | None) -> None:
        self.report = report
        self.pending = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self.pending + chunk.replace(b"\r\n", b"\n")
        whole, sep, self.pending = data.rpartition(b"\n\n")
        if not sep:
            self.pending = data
            return b""
        kept = [event for event in whole.split(b"\n\n") if not self._usage(event)]
        return b"".join(event + b"\n\n" for event in kept)

    def flush(self) -> bytes:
        rest, self.pending = self.pending, b""
        return b"" if self._usage(rest) else rest

    def _usage(self, event: bytes) -> bool:
        lines = event.strip(b"\n").split(b"\n")
        if not lines or lines[0].strip() != _USAGE_EVENT:
            return False
        text = b"".join(line[5:].strip() for line in lines[1:] if line.startswith(b"data:"))
        if not text.isdigit():
            log.warning("ignoring a bad svc-usage event from an upstream: %r", event[:60])
        elif self.report is not None:  # None: paid up front, nothing is metered
            try:
                self.report(int(text))
            except ValueError as exc:
                log.warning("ignoring an svc-usage event from an upstream: %s", exc)
        return True


class RelayedAnswer(Response):
    """The streamed answer of one paid request (run by the ASGI call, not the handler:
    the upstream is read while the payer is answered).  ``opened`` holds the upstream's
    connection, closed when the relay ends."""

    def __init__(
        self,
        opened: AsyncExitStack,
        upstream: outbound.OutboundStream,
        headers: list[tuple[str, str]],
        core: GateCore,
        outcome: Paid,
    ) -> None:
        super().__init__(status_code=upstream.status)
        self._opened, self._upstream, self._relayed = opened, upstream, headers
        self._core, self._outcome = core, outcome

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            held = self._outcome.held
            if held is None:  # paid up front (a receipt): nothing to settle
                await self._relay(scope, receive, send)
                return
            route = Route(held.offer.resource_id, settle="after_body")
            await serve_held(
                self._core, self._outcome, self._relay, scope, receive, send, route=route
            )
        finally:
            await self._opened.aclose()

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The upstream's answer as an ASGI app: its head, then each chunk."""
        added = [(k, v) for k, v in self.raw_headers if k not in _FRAMING]
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self._relayed]
        if self._outcome.held is None:
            headers += list(self._outcome.raw_headers)
        if not any(name == b"cache-control" for name, _ in headers):
            headers.append((b"cache-control", b"private"))
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": headers + added}
        )
        events = UsageEvents((scope.get("extensions") or {}).get(USAGE_EXTENSION))
        try:
            async for chunk in self._upstream.chunks():
                data = events.feed(chunk)
                if data:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
        except outbound.OutboundFailed as exc:  # the answer has started: end it where it broke
            log.warning("the upstream's stream broke off: %s", exc)
        await send({"type": "http.response.body", "body": events.flush(), "more_body": False})

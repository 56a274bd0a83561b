"""What a metered answer used: :class:`Usage`, reported by the app two ways.

* ``scope["extensions"]["svc.usage"](units)``: a callable the app calls as often as it
  likes while it answers, each call *adding* ``units`` (a bad value raises
  :class:`ValueError` in the app, where the mistake is);
* an ``X-Svc-Usage`` response header (in ``http.response.start`` or the app's own
  trailers) giving units as a whole number, for apps that cannot reach the scope; the gate
  strips it (it is the seller's business, not the payer's) and adds it to the calls.  A bad
  header is logged and ignored: the answer is already going out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from svc.money import MAX_UNITS

from ._asgi import Message, Scope, Send

__all__ = ["USAGE_EXTENSION", "USAGE_HEADER", "Usage", "ignoring_usage"]

log = logging.getLogger("svc_asgi")

#: The ``scope["extensions"]`` key of the app's usage callable.
USAGE_EXTENSION = "svc.usage"
#: The response header (lowercase, as ASGI has it) an app may report its units in.
USAGE_HEADER = b"x-svc-usage"


class Usage:
    """The units one answer used, summed over the app's reports."""

    def __init__(self) -> None:
        self.units = 0

    def add(self, units: int) -> None:
        """Add ``units`` (a whole number, 0 to :data:`~svc.money.MAX_UNITS` in total)."""
        if isinstance(units, bool) or not isinstance(units, int) or units < 0:
            raise ValueError(f"usage must be a whole number of units >= 0, got {units!r}")
        if self.units + units > MAX_UNITS:
            raise ValueError(f"usage cannot pass {MAX_UNITS} units in one answer")
        self.units += units

    def install(self, scope: Scope) -> None:
        """Hand the app :meth:`add` as ``scope["extensions"]["svc.usage"]``."""
        scope["extensions"] = {**(scope.get("extensions") or {}), USAGE_EXTENSION: self.add}

    def take_header(self, headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """``headers`` without ``X-Svc-Usage``, whose units are added."""
        kept: list[tuple[bytes, bytes]] = []
        for name, value in headers:
            if name.lower() != USAGE_HEADER:
                kept.append((name, value))
                continue
            text = value.decode("latin-1").strip()
            try:
                if not (text.isascii() and text.isdigit()):
                    raise ValueError(text)
                self.add(int(text))
            except ValueError:
                log.warning("ignoring a bad X-Svc-Usage header from the app: %r", value[:40])
        return kept


def ignoring_usage(scope: Scope, send: Send) -> Send:
    """For a metered route paid up front (a receipt, not a claim): the app reports usage
    as ever, and its ``X-Svc-Usage`` is stripped, but nothing is settled by it."""
    usage = Usage()
    usage.install(scope)

    async def send_stripped(message: Message) -> None:
        if message["type"] in ("http.response.start", "http.response.trailers"):
            message = {**message, "headers": usage.take_header(message.get("headers", ()))}
        await send(message)

    return send_stripped

"""Settling a claimed payment once the whole answer is out: :class:`AfterBodyAnswer`.

A metered route is charged by the units its answer used, known only at its end; a seller
may also want a fixed price settled only once the body was delivered
(``Route(..., settle="after_body")``).  So, unlike :class:`~svc_asgi._held.HeldAnswer`:

* a status of 400 or more at the start releases the claim, as ever;
* the start is held until the first body message.  When that is also the last, the answer
  is one message: it is settled then and goes out with the payment headers, or is
  withheld for the 402 (or 503), exactly as a held answer;
* otherwise the start goes out at once (``Cache-Control: private``) and every chunk
  passes through as it comes.  At the app's last chunk the payment is settled for the
  units reported (:mod:`svc_asgi._usage`), and the payer learns of it: a
  ``text/event-stream`` gets a final ``svc-receipt`` event, a request that sent
  ``TE: trailers`` to a server offering ``http.response.trailers`` gets the receipt
  headers as trailers.  There is nothing left to withhold, so a settlement that fails
  is logged, and the event or trailer says so;
* the payer leaving mid-stream (``http.disconnect`` from ``receive``, or ``send``
  raising) stops delivery; once the app ends, the usage reported up to the moment the
  payer left is settled, never more.  An app that raises after its first byte has its usage settled
  (``on_failure="settle"``) or its claim released (``"release"``); before its start,
  it is released.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from svc.money import format_amount

from ._asgi import ASGIApp, Message, Receive, Scope, Send, request_id_of
from ._core import GateCore, Paid, Refusal
from ._held import HeldAnswer
from ._prices import OnFailure, Route
from ._usage import Usage

__all__ = ["AfterBodyAnswer", "serve_held"]

log = logging.getLogger("svc_asgi")

_TRAILERS_EXTENSION = "http.response.trailers"
#: What the ``Trailer`` header announces: the paid answer's headers, or why it was not paid.
_TRAILER_NAMES = b"X-Svc-Receipt, Payment-Receipt, PAYMENT-RESPONSE, X-Svc-Receipt-Error"
_RECEIPT_ERROR = b"x-svc-receipt-error"
_DISCONNECT_NAMES = frozenset({"ClientDisconnect", "ClientDisconnected"})


def _disconnected(exc: Exception) -> bool:
    """A ``send`` failing because the client left: ``OSError`` (ASGI 2.4) or a framework's
    own ``ClientDisconnect`` (matched by name: no framework is imported here)."""
    return isinstance(exc, OSError) or type(exc).__name__ in (
        "ClientDisconnect",
        "ClientDisconnected",
    )


def _wants_trailers(scope: Scope) -> bool:
    """The client accepts trailers (``TE: trailers``) and the server can send them."""
    if _TRAILERS_EXTENSION not in (scope.get("extensions") or {}):
        return False
    return any(
        name == b"te" and b"trailers" in value.lower() for name, value in scope.get("headers", ())
    )


class AfterBodyAnswer(HeldAnswer):
    """The ``send`` (and ``receive``) of a request settled after its body; see the module."""

    def __init__(
        self,
        core: GateCore,
        paid: Paid,
        send: Send,
        request_id: str,
        *,
        scope: Scope,
        metered: bool,
        on_failure: OnFailure,
    ) -> None:
        super().__init__(core, paid, send, request_id)
        self.metered = metered
        self.on_failure = on_failure
        self.usage = Usage()
        self.usage.install(scope)
        self.trailers = _wants_trailers(scope)
        #: The app's start, held until its first body message.
        self.start: Message | None = None
        #: The start is out: chunks pass through.
        self.streaming = False
        self.event_stream = False
        #: The app sends its own trailers: the answer ends with them, not its last chunk.
        self.app_trailers = False
        #: Everything has gone out (or the payer left): later messages are dropped.
        self.done = False
        self.gone = False
        #: The units reported when the payer left: what they are charged, never more.
        self.units_at_leaving: int | None = None

    def watch(self, receive: Receive) -> Receive:
        """``receive``, noting the payer leaving."""

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not self.done:
                self._left()
            return message

        return watched

    async def send(self, message: Message) -> None:
        if (  # a stream's every chunk: straight through
            self.streaming
            and message.get("more_body")
            and message["type"] == "http.response.body"
            and not (self.done or self.gone or self.app_trailers)
        ):
            await self._deliver(message)
            return
        if self.decided == "released":  # a failed answer goes out as it is
            await self.downstream(message)
            return
        if self.done or self.gone or self.decided == "withheld":
            return
        kind = message["type"]
        if kind == "http.response.start":
            message = {**message, "headers": self.usage.take_header(message.get("headers", ()))}
            status = int(message.get("status", 200))
            if status >= 400:
                await self._shielded_release(status)
                await self.downstream(message)
                return
            self.start = message
        elif kind == "http.response.body":
            await self._body(message)
        elif kind == "http.response.trailers":
            await self._trailers(message)
        else:
            await self._deliver(message)

    async def finish(self, status: int | None) -> None:
        """The app returned (``None``) or raised (500): settle or release what is open."""
        if self.done or self.decided is not None:
            return
        if not self.streaming:
            if self.start is not None and status is None and not self.gone:  # no body: empty
                await self._body({"type": "http.response.body", "body": b""})
                return
            await self._shielded_release(status)  # nothing was delivered
            return
        self.done = True
        if status is not None and not self.gone and self.on_failure == "release":
            await self._shielded_release(status)
            return
        if status is not None:
            log.warning("the app failed mid-answer; settling the %d units reported", self._units())
        await self._settled()

    # --- the body -----------------------------------------------------------------------------

    async def _body(self, message: Message) -> None:
        more = bool(message.get("more_body", False))
        if not self.streaming:
            start = self.start
            if start is None:  # a body before any start: the server will say so
                await self._deliver(message)
                return
            if not more and not start.get("trailers", False):  # one message: settle first
                self.done = True
                with anyio.CancelScope(shield=True):
                    await self._settle(start, self._units())
                if self.decided == "settled":
                    await self.downstream(message)
                return
            await self._open(start)
        if more or self.app_trailers:
            await self._deliver(message)
        elif self.event_stream or self.trailers:
            await self._deliver({**message, "more_body": True})
            await self._end(await self._settled())
        else:
            await self._deliver(message)
            self.done = True
            await self._settled()

    async def _open(self, start: Message) -> None:
        """Send the start now: the body streams, the receipt comes at its end."""
        headers = list(start.get("headers", ()))
        names = {name.lower() for name, _ in headers}
        self.event_stream = any(
            name.lower() == b"content-type" and value.lower().startswith(b"text/event-stream")
            for name, value in headers
        )
        if self.event_stream or self.trailers:  # more is added: the app's length is wrong
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        if b"cache-control" not in names:
            headers.append((b"cache-control", b"private"))
        self.app_trailers = bool(start.get("trailers", False))
        opened: dict[str, Any] = {**start, "headers": headers}
        if self.trailers:
            headers.append((b"trailer", _TRAILER_NAMES))
            opened["trailers"] = True
        self.start = None
        self.streaming = True
        await self._deliver(opened)

    async def _trailers(self, message: Message) -> None:
        """The app's own trailers (it declared them): the end of its answer."""
        headers = self.usage.take_header(message.get("headers", ()))
        if message.get("more_trailers", False):
            await self._deliver({**message, "headers": headers})
            return
        self.done = True
        settled = await self._settled()
        if self.trailers:
            headers += _receipt_trailers(settled)
        await self._deliver({**message, "headers": headers})

    async def _end(self, settled: Paid | Refusal) -> None:
        """Close a stream with what became of its payment (after the app's last chunk)."""
        self.done = True
        body = self._receipt_event(settled) if self.event_stream else b""
        await self._deliver({"type": "http.response.body", "body": body, "more_body": False})
        if self.trailers:
            trailers = _receipt_trailers(settled)
            await self._deliver({"type": "http.response.trailers", "headers": trailers})

    # --- settling -----------------------------------------------------------------------------

    def _left(self) -> None:
        if not self.gone:
            self.gone = True
            self.units_at_leaving = self.usage.units

    def _units(self) -> int | None:
        if not self.metered:
            return None
        return self.usage.units if self.units_at_leaving is None else self.units_at_leaving

    async def _settled(self) -> Paid | Refusal:
        """Settle the usage reported so far; a refusal is logged (nothing to withhold)."""
        self.decided = "settled"
        with anyio.CancelScope(shield=True):  # e.g. a framework cancelling on disconnect
            settled = await self.core.settle(self.paid, units=self._units())
        if type(settled) is not Paid:
            held = self.paid.held
            log.log(
                logging.INFO if self._units() == 0 else logging.WARNING,  # 0 units: released
                "settling %s after the answer was delivered failed: %s",
                held.offer.resource_id if held else "?",
                _why(settled),
            )
        return settled

    async def _shielded_release(self, status: int | None) -> None:
        with anyio.CancelScope(shield=True):
            await self._release(status)

    async def _deliver(self, message: Message) -> None:
        try:
            await self.downstream(message)
        except Exception as exc:
            if _disconnected(exc):
                self._left()
            raise

    def _receipt_event(self, settled: Paid | Refusal) -> bytes:
        held = self.paid.held
        event: dict[str, Any] = {"receipt_id": None, "amount": "0", "units": self._units()}
        event["rail"] = held.source if held is not None else None
        if type(settled) is Paid:
            amount = settled.payment.amount
            event["receipt_id"] = settled.payment.receipt_id
            event["amount"] = format_amount(amount) if amount is not None else None
        else:
            event["reason"] = _why(settled)
        data = json.dumps(event, separators=(", ", ": "))
        return f"event: svc-receipt\ndata: {data}\n\n".encode()


def _why(settled: Paid | Refusal) -> str:
    if not isinstance(settled, Refusal):
        return ""
    return str(settled.extra.get("refused_because") or settled.message)


def _receipt_trailers(settled: Paid | Refusal) -> list[tuple[bytes, bytes]]:
    """The receipt headers as trailers, or why there is none."""
    if type(settled) is Paid:
        return list(settled.raw_headers)
    reason = _why(settled).encode("latin-1", "replace").replace(b"\r", b" ").replace(b"\n", b" ")
    return [(_RECEIPT_ERROR, reason)]


async def serve_held(
    core: GateCore,
    paid: Paid,
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    route: Route | None = None,
) -> None:
    """Run ``app`` for a claimed payment, its answer held back until the payment is
    settled or released (:class:`~svc_asgi._held.HeldAnswer`), or until its whole body
    is out for a metered or ``after_body`` route (:class:`AfterBodyAnswer`): the one way
    both a seller's gate and the service's hosted gates serve a held payment.  ``route``:
    its settlement options (``None``: the defaults)."""
    answer = HeldAnswer(core, paid, send, request_id_of(scope))
    held = paid.held
    if held is not None and scope["type"] == "http":
        after_body = route is not None and route.settle == "after_body"
        if held.offer.metered or after_body:
            answer = AfterBodyAnswer(
                core,
                paid,
                send,
                answer.request_id,
                scope=scope,
                metered=held.offer.metered,
                on_failure="settle" if route is None else route.on_failure,
            )
            receive = answer.watch(receive)
    try:
        await app(scope, receive, answer.send)
    except BaseException:
        with anyio.CancelScope(shield=True):  # also when the client went away
            await answer.finish(500)
        raise
    await answer.finish(None)

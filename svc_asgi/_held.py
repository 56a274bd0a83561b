"""Serving a request whose open-rail payment is claimed, not settled: :class:`HeldAnswer`.

"Verify, serve, then settle": the app runs, and what it sends is watched.

* HTTP: ``http.response.start`` is held back until its status is known.  Below 400 the
  payment is settled (:meth:`GateCore.settle`) and the start goes out with the payment
  headers (``X-Svc-Receipt``, ``Payment-Receipt`` / ``PAYMENT-RESPONSE``,
  ``Cache-Control: private``); the body then streams through, unheld: a body that fails
  midway was paid for.  At 400 or above the claim is released (nothing moves) and the
  app's answer goes out as it is, with no payment header.  A settlement that fails
  replaces the answer with the 402 (nothing moved) or a 503 (the outcome is unknown);
  the app's body is dropped.
* WebSocket: ``websocket.accept`` is the success (settled first, headers added to it);
  a ``websocket.close`` or denial response before it is a failure (released).  A
  settlement that fails closes the handshake (1008) instead of accepting it.
* An app that raises, or answers nothing, releases the claim.
"""

from __future__ import annotations

from ._asgi import Message, Send, add_paid_headers, send_response
from ._core import GateCore, Paid, Refusal
from ._websocket import POLICY_VIOLATION, add_accept_headers, close_reason

__all__ = ["HeldAnswer"]

_SUCCESS = ("http.response.start", "websocket.accept")
_FAILURE = ("websocket.close", "websocket.http.response.start")


class HeldAnswer:
    """The ``send`` a held request's app gets (:meth:`send`), and its ending."""

    def __init__(self, core: GateCore, paid: Paid, send: Send, request_id: str) -> None:
        self.core = core
        self.paid = paid
        self.downstream = send
        self.request_id = request_id
        #: ``settled``, ``released`` or ``withheld`` once decided.
        self.decided: str | None = None

    async def send(self, message: Message) -> None:
        if self.decided == "withheld":
            return  # the answer was replaced by the refusal: drop the rest
        kind = message["type"]
        if self.decided is None and kind in _SUCCESS:
            status = int(message.get("status", 200))
            if status < 400:
                await self._settle(message)
                return
            await self._release(status)
        elif self.decided is None and kind in _FAILURE:
            await self._release(int(message.get("status", 403)))
        await self.downstream(message)

    async def finish(self, status: int | None) -> None:
        """The app returned (``None``) or raised (500): release a claim still held."""
        if self.decided is None:
            await self._release(status)

    async def _release(self, status: int | None) -> None:
        self.decided = "released"
        reason = "answer_missing" if status is None else "answer_failed"
        await self.core.release(self.paid, status=status, reason=reason)

    async def _settle(self, message: Message, units: int | None = None) -> None:
        settled = await self.core.settle(self.paid, units=units)
        websocket = message["type"] == "websocket.accept"
        if type(settled) is Paid:
            self.decided = "settled"
            if websocket:
                send = add_accept_headers(self.downstream, settled.raw_headers, settled.raw_names)
            else:
                send = add_paid_headers(
                    self.downstream, settled.raw_headers, settled.raw_names, settled.raw_watched
                )
            await send(message)
            return
        self.decided = "withheld"
        if not isinstance(settled, Refusal):  # pragma: no cover - Paid or Refusal only
            raise TypeError(f"settle answered a {type(settled).__name__}")
        if websocket:
            reason = close_reason(settled)
            await self.downstream(
                {"type": "websocket.close", "code": POLICY_VIOLATION, "reason": reason}
            )
            return
        status, headers, body = settled.render(self.request_id)
        await send_response(self.downstream, status, body, headers=headers)

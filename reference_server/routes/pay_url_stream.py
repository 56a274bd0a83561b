"""``POST /spend/pay-url`` with ``stream``: the paid answer relayed as it arrives.

The answer is ``application/x-ndjson``, one JSON object per line, each written as soon as
it is known: ``{"type": "head", "status", "headers"}`` once the paid request's successful
head is in, ``{"type": "chunk", "data": <base64>}`` per chunk the URL sent, then
``{"type": "result", ...}`` (the PayUrlResult without its body) once the money has
concluded -- or ``{"type": "error", "status", "error": {...}}`` when the answer broke off
midway (``status``: what the buffered mode would have answered).
Whatever ends the attempt before that head answers as the buffered mode does (the same
status and error envelope): the head is what commits the answer to ``200``.

A client that goes away mid-stream cancels the relay; the attempt then concludes as an
abandoned one (shielded, :func:`~..domain.paid_fetch.flow.pay`): what the URL settled is
spent, the rest released.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import anyio
import attrs
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from svc import Approval, PayUrlResult

from ..domain.errors import DomainError
from ..domain.paid_fetch import flow
from ..domain.paid_fetch.attempts import Replay, Started
from ..invariant import InvariantError
from ..web.errors import http_error
from ..web.responses import to_json_body

__all__ = ["PayUrlStream"]

#: What the result line leaves out: the body went by as chunks.
_BODY_FIELDS = ("body", "body_encoding", "body_truncated")
_FRAMING = (b"content-length", b"content-type")


class PayUrlStream(Response):
    """The streamed answer of one attempt (run by the ASGI call, not the handler: the
    status is known only once the paid request's head is in)."""

    def __init__(
        self,
        job: flow.Job,
        begun: Started | Replay,
        request_id: str,
        fallback: Callable[[flow.Answer], Response],
    ) -> None:
        super().__init__(media_type="application/x-ndjson", headers={"Cache-Control": "no-store"})
        self._job, self._begun, self._request_id = job, begun, request_id
        #: The buffered mode's answer, for an attempt that ended before any head.
        self._fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # What the pipeline set (rate limits), for whichever answer goes out.
        added = [(k, v) for k, v in self.raw_headers if k not in _FRAMING]
        lines = _Lines(send, added)
        job = attrs.evolve(self._job, relay=lines)
        answer: flow.Answer | None = None
        async with anyio.create_task_group() as group:

            async def watch() -> None:  # the client went away: stop relaying
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch)
            answer = await flow.pay(job, self._begun)
            group.cancel_scope.cancel()
        if answer is None:  # the client left; the attempt concluded without it
            return
        if not lines.started:
            buffered = self._fallback(answer)
            for name, value in added:
                buffered.headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
            await buffered(scope, receive, send)
            return
        if isinstance(answer.result, Approval):  # an approval is asked before any head
            raise InvariantError("an attempt that relayed a head was not waiting for a person")
        await lines.write(_last(answer.result, lines.broke, self._request_id))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _last(
    result: PayUrlResult | DomainError, broke: DomainError | None, request_id: str
) -> dict[str, Any]:
    """The final line: the result, or the error that ended the relayed answer."""
    if isinstance(result, DomainError):
        answered = http_error(result)
        return {"type": "error", "status": answered.status, **answered.body(request_id)}
    if broke is None:
        body = to_json_body(result, request_id)
        return {"type": "result", **{k: v for k, v in body.items() if k not in _BODY_FIELDS}}
    # It broke off, yet the URL settled: what it settled is spent, and the error says so.
    answered = http_error(broke)
    envelope = answered.body(request_id)
    spent = {"attempt_id": result.attempt_id, "amount": str(result.amount)}
    envelope["error"]["details"] = {**(envelope["error"].get("details") or {}), **spent}
    return {"type": "error", "status": answered.status, **envelope}


class _Lines:
    """The relay (:class:`~..domain.paid_fetch.flow.Relay`) writing NDJSON lines."""

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        self._send = send
        self._headers = headers
        self.started = False
        self.broke: DomainError | None = None

    async def head(self, status: int, headers: dict[str, str]) -> None:
        await self._send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/x-ndjson"), *self._headers],
            }
        )
        self.started = True
        await self.write({"type": "head", "status": status, "headers": headers})

    async def chunk(self, data: bytes) -> None:
        await self.write({"type": "chunk", "data": base64.b64encode(data).decode("ascii")})

    def broke_off(self, error: DomainError) -> None:
        self.broke = error

    async def write(self, value: dict[str, Any]) -> None:
        raw = json.dumps(value, separators=(",", ":"), default=str).encode() + b"\n"
        await self._send({"type": "http.response.body", "body": raw, "more_body": True})

# Generated from svc/_async_pay_url_stream.py by `python -m tests.unasync` -- do not edit.
"""``spend.pay_url(url, stream=True)``: the paid answer's bytes as they arrive, then the
result (the source of ``_pay_url_stream``, ``python -m tests.unasync``).

The service answers NDJSON lines (``head``, ``chunk``..., then ``result`` or ``error``);
this reads them off the open connection one by one, so a chunk reaches the caller as soon
as the service relayed it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import attrs
import httpx

from ._base_client import error_from_body
from ._models import PayUrlResult
from ._spec import as_model
from .wire import structure

__all__ = ["PayUrlStream", "StreamHead"]


@attrs.frozen
class StreamHead:
    """The paid URL's answer head: its status and the headers pay-url relays."""

    status: int
    headers: dict[str, str]


class PayUrlStream:
    """Iterate it for the body's chunks; then :attr:`result` is the :class:`PayUrlResult`
    (its ``body`` empty: the body went by as the chunks).  An answer that broke off midway
    raises the service's error (with its request id) at the end of the iteration.  Use it
    as a context manager, or call ``close``, to close the connection."""

    def __init__(
        self,
        response: httpx.Response,
        lines: Iterator[str] | None,
        head: StreamHead,
        whole: PayUrlResult | None = None,
    ):
        self._response = response
        self._lines = lines
        self._whole = whole
        self.head = head
        self.result: PayUrlResult | None = None

    @classmethod
    def open(cls, response: httpx.Response) -> PayUrlStream:
        """The stream of ``response`` (a 200 being read), once its head line is in.

        An ``Idempotency-Key`` replay is answered whole (JSON): its stored body is then
        the one chunk."""
        if response.headers.get("content-type", "").startswith("application/json"):
            response.read()
            whole = as_model(PayUrlResult)(response)
            head = StreamHead(whole.upstream_status or 200, whole.headers)
            return cls(response, None, head, whole)
        lines = response.iter_lines()
        try:
            first = json.loads(next(lines))
        except BaseException:
            response.close()
            raise
        return cls(response, lines, StreamHead(first["status"], first["headers"]))

    def __iter__(self) -> Iterator[bytes]:
        if self._lines is None:  # a replay, answered whole
            self.result = self._whole
            yield b"" if self._whole is None else self._whole.content
            return
        for line in self._lines:
            if not line:
                continue
            item: dict[str, Any] = json.loads(line)
            kind = item.pop("type")
            if kind == "chunk":
                yield base64.b64decode(item["data"])
            elif kind == "result":
                self.result = structure(item, PayUrlResult)
            elif kind == "error":
                raise error_from_body(item.pop("status"), item, self._response.headers)

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

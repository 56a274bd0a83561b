# Generated from svc/_async_send.py by `python -m tests.unasync` -- do not edit.
"""How a namespace method sends its spec where the client's ``_request`` alone is not all
of it (``Sdk(send=...)`` on the route), and what a namespace needs from its client.

The source of ``_send`` (``python -m tests.unasync``), like the namespaces that call it.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol, TypeVar

import attrs

from ._errors import PaymentRequiredError
from ._models import PayUrlResult, TopUp
from ._options import RequestOptions
from ._pay_url_stream import PayUrlStream
from ._spec import RequestSpec
from ._top_up_payer import payment_headers
from .money import parse_amount, to_micros

__all__ = ["PayUrlStream", "Requester", "send_pay_url", "send_top_up"]

T = TypeVar("T")


class Requester(Protocol):
    """What a namespace needs from its client: send a spec, get the model."""

    def _request(self, spec: RequestSpec[T], options: RequestOptions | None = None) -> T: ...

    def _stream(
        self, spec: RequestSpec[Any], options: RequestOptions | None = None
    ) -> PayUrlStream: ...


def send_pay_url(
    client: Requester,
    spec: RequestSpec[PayUrlResult],
    options: RequestOptions | None,
    *,
    stream: bool,
    **_: Any,
) -> PayUrlResult | PayUrlStream:
    """``pay_url``: the result, or with ``stream`` the answer's stream once its head is in."""
    if not stream:
        return client._request(spec, options)
    body = {**(spec.json or {}), "stream": True}
    return client._stream(attrs.evolve(spec, json=body, accept="application/x-ndjson"), options)


def send_top_up(
    client: Requester,
    spec: RequestSpec[TopUp],
    options: RequestOptions | None,
    *,
    amount: Any,
    payer: Any,
    method: str | None,
) -> TopUp:
    """A top-up that, given a ``payer``, pays its own 402 challenge and retries with the
    same ``Idempotency-Key``: one call, one payment."""
    opts = options or RequestOptions()
    if payer is None or method == "card":
        return client._request(spec, opts)
    # One key for the challenge and the paid retry: a retry of the call pays once.
    opts = attrs.evolve(opts, idempotency_key=opts.idempotency_key or str(uuid.uuid4()))
    try:
        return client._request(spec, opts)  # paid under this key already
    except PaymentRequiredError as challenge:
        signed = payment_headers(challenge, payer, to_micros(parse_amount(amount)))
    extra = {**(opts.extra_headers or {}), **signed}
    return client._request(spec, attrs.evolve(opts, extra_headers=extra))

# Generated from svc/_async_client.py by `python -m tests.unasync` -- do not edit.
"""The client: :class:`BaseClient` plus the send path.

Everything but sending and sleeping is in ``_base_client``; see there for the loop.
``_async_client`` is the source; ``_client`` is generated from it by
``python -m tests.unasync``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar, overload

import httpx

from . import _convert
from . import _endpoints as ep
from ._base_client import BaseClient, Retry
from ._convert import Amount, JSONDocument, TextDocument
from ._errors import ApprovalRequired
from ._models import Approval, Capabilities, Health, Jwks, PayResult
from ._namespaces import Namespaces
from ._options import RequestOptions
from ._pay_url_stream import PayUrlStream
from ._sender import Sender
from ._spec import RequestSpec

__all__ = ["Client"]

T = TypeVar("T")


class Client(
    BaseClient[httpx.BaseTransport, httpx.Client, Callable[[float], None]],
    Namespaces,
):
    """Client for the svc API.

    ::

        with svc.Client(seller_key="svc_sk_test_...") as client:
            resource = client.resources.create(kind="http", path="/v1/report", amount="0.05")

    Credentials, ``base_url`` and ``environment`` default to the ``SVC_*`` environment
    variables.  ``transport`` (e.g. :class:`httpx.MockTransport`) or a ready
    ``httpx.Client`` as ``http_client`` replace the network for tests or proxies; a
    client passed in is not closed by :meth:`close`, since its owner may still use it.
    ``sleep`` is how retries wait (``time.sleep`` by default), injectable so tests need
    not.
    """

    def _open(
        self,
        http_client: httpx.Client | None,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None] | None,
    ) -> None:
        self._http = Sender(http_client, transport)
        self._sleep = sleep or time.sleep

    def _request(self, spec: RequestSpec[T], options: RequestOptions | None = None) -> T:
        call = self._prepare(spec, options)
        while True:
            outcome: T | Retry
            try:
                response = self._http.send(call.request)
            except httpx.RequestError as exc:
                outcome = call.on_transport_error(exc)
            else:
                outcome = call.on_response(response)
            if not isinstance(outcome, Retry):
                return outcome
            self._sleep(outcome.delay)

    def _stream(
        self, spec: RequestSpec[Any], options: RequestOptions | None = None
    ) -> PayUrlStream:
        """``spec`` sent as :meth:`_request` sends it, its ``200`` read as a stream once its
        head line is in (``pay_url(stream=True)``); an error answer raises as there."""
        call = self._prepare(spec, options)
        while True:
            try:
                response = self._http.send(call.request, stream=True)
            except httpx.RequestError as exc:
                retry = call.on_transport_error(exc)
            else:
                if response.is_success:
                    return PayUrlStream.open(response)
                response.read()
                retry = call.on_error(response)
            self._sleep(retry.delay)

    # --- top-level endpoints ----------------------------------------------------------------

    def wait_for_approval(
        self,
        approval_id: str,
        *,
        timeout: float = 900.0,
        poll: float = 2.0,
        on_poll: Callable[[Approval], object] | None = None,
        options: RequestOptions | None = None,
    ) -> Approval:
        """Read the approval every ``poll`` seconds until a person decides it (or it
        expires), and return it: ``approved`` (repeat the request with its
        ``Idempotency-Key`` to pay), ``declined``, ``expired`` or ``used``.  ``on_poll``
        sees each read that is still ``pending`` (a progress line); past ``timeout``
        seconds :class:`~svc.ApprovalRequired` is raised again: it still waits."""
        deadline = time.monotonic() + timeout
        while True:
            approval = self.spend.approval(approval_id, options=options)
            if approval.status != "pending":
                return approval
            if time.monotonic() >= deadline:
                raise ApprovalRequired.waiting(approval)
            if on_poll is not None:
                on_poll(approval)
            self._sleep(poll)

    def health(self, *, options: RequestOptions | None = None) -> Health:
        """Liveness: the process answers."""
        return self._request(_convert.health(), options)

    def ready(self, *, options: RequestOptions | None = None) -> Health:
        """Readiness: dependencies answer; raises :class:`~svc.ServerError` (503) if not."""
        return self._request(_convert.ready(), options)

    def capabilities(self, *, options: RequestOptions | None = None) -> Capabilities:
        """Auth modes, pay shapes and MCP URLs: what an agent needs to start paying."""
        return self._request(_convert.capabilities(), options)

    def jwks(self, *, options: RequestOptions | None = None) -> Jwks:
        """The keys receipt tokens are signed with: what :func:`svc.receipts.verify`
        checks a token against, offline."""
        return self._request(_convert.jwks(), options)

    @overload
    def pay(self, *, resource_id: str, options: RequestOptions | None = None) -> PayResult: ...
    @overload
    def pay(
        self, *, destination: str, amount: Amount, options: RequestOptions | None = None
    ) -> PayResult: ...
    def pay(
        self,
        *,
        resource_id: str | None = None,
        destination: str | None = None,
        amount: Amount | None = None,
        options: RequestOptions | None = None,
    ) -> PayResult:
        """Pay on the service ledger with the wallet key (``POST /pay``).

        ``pay(resource_id=...)`` buys an in-service resource at its price (the seller's
        balance is credited; the seller checks ``receipt_id`` with ``access.verify``);
        ``pay(destination="@name", amount=...)`` transfers to a handle.  Exactly one form,
        else ``ValueError`` before sending.

        Like every mutating call it carries an ``Idempotency-Key`` reused across retries,
        so a retried pay is charged once; pass your own in ``options`` to repeat a pay
        safely across restarts.  A limit of the key's policy gives
        :class:`~svc.PaymentRequiredError` (402).  External 402 URLs and hosted gates are
        paid with ``pay-url``, not here.
        """
        spec = ep.pay(resource_id=resource_id, destination=destination, amount=amount)
        return self._request(spec, options)

    @overload
    def discovery(self, name: TextDocument, *, options: RequestOptions | None = None) -> str: ...
    @overload
    def discovery(
        self, name: JSONDocument, *, options: RequestOptions | None = None
    ) -> dict[str, Any]: ...
    @overload
    def discovery(
        self, name: str, *, options: RequestOptions | None = None
    ) -> str | dict[str, Any]: ...
    def discovery(
        self, name: str, *, options: RequestOptions | None = None
    ) -> str | dict[str, Any]:
        """A discovery document: ``str`` for ``llms*.txt``, ``dict`` for the JSON ones."""
        return self._request(_convert.discovery(name), options)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Release pooled connections (not those of an ``http_client`` passed in)."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""The official SDK's client for the server's settings.

One client per call site is cheap (it holds keys and addresses, and shares the SDK's HTTP
client); retries with backoff are the SDK's own (``max_network_retries``), which also sends
each retried ``POST`` with the same idempotency key.  Every call the SDK makes passes
through :class:`_Traced`, the one place a span per processor call is made.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import stripe
from stripe._http_client import new_default_http_client, new_http_client_async_fallback

from ..settings import Settings
from ..telemetry import annotate, current_traceparent, failed, span

__all__ = ["operation_of", "stripe_client", "uses_stripe"]

#: The SDK's HTTP client of this process, made once (it keeps its connections).
_http: stripe.HTTPClient | None = None
#: A path segment that is an object's id (``acct_1N…``, ``po_…``, ``cs_test_a1…``): a
#: prefix and random letters and digits, where a resource's name has neither.
_ID = re.compile(r"^[a-z]+_(?=[A-Za-z0-9_]*[A-Z0-9])[A-Za-z0-9_]+$")


def uses_stripe(settings: Settings, environment: str) -> bool:
    """Whether ``environment``'s cards and payouts go through Stripe: ``live`` with
    ``SVC_PROCESSOR=stripe``; ``test`` always has the sandbox."""
    return environment == "live" and settings.processor == "stripe"


#: Where Stripe serves the pages it hosts for a person, by what they are for.
_HOSTED = {"checkout": "https://checkout.stripe.com", "connect": "https://connect.stripe.com"}


def hosted_origin(settings: Settings, pages: Literal["checkout", "connect"]) -> str:
    """The origin of the processor's hosted ``pages`` (Checkout, Connect onboarding), which
    a form of ours redirects to, so its page's CSP must name it: Stripe's own, or the
    local server that ``stripe_api_base`` names, which serves every page itself."""
    base = settings.stripe_api_base
    if base is None:
        return _HOSTED[pages]
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}"


def stripe_client(settings: Settings) -> stripe.StripeClient:
    global _http
    if settings.stripe_secret_key is None:
        raise ValueError("SVC_STRIPE_SECRET_KEY is not set")
    base = settings.stripe_api_base
    if _http is None:
        _http = _Traced(
            new_default_http_client(async_fallback_client=new_http_client_async_fallback())
        )
    return stripe.StripeClient(
        settings.stripe_secret_key,
        base_addresses={} if base is None else {"api": base.rstrip("/")},
        max_network_retries=settings.stripe_max_network_retries,
        http_client=_http,
    )


def operation_of(method: str, url: str) -> str:
    """The SDK method a request is, from its method and path, ids left out: ``POST
    /v1/accounts/acct_1/login_links`` is ``accounts.login_links.create``."""
    segments = [s for s in urlsplit(url).path.split("/") if s and s != "v1"]
    names = [s for s in segments if not _ID.match(s)]
    on_one = bool(segments) and _ID.match(segments[-1]) is not None
    verb = {
        ("GET", False): "list",
        ("GET", True): "retrieve",
        ("POST", False): "create",
        ("POST", True): "update",
        ("DELETE", True): "delete",
    }.get((method.upper(), on_one), method.lower())
    return ".".join([*names, verb])


#: What the SDK's HTTP clients answer: (body or stream, status, headers).
_Answer = TypeVar("_Answer", bound=tuple[Any, int, Mapping[str, str]])


def _with_traceparent(rest: tuple[Any, ...]) -> tuple[Any, ...]:
    """The call's arguments after the URL (its headers first), the current span added to
    the headers as a W3C ``traceparent`` when this process traces."""
    traceparent = current_traceparent()
    if traceparent is None:
        return rest
    headers, *others = rest
    return ({**headers, "traceparent": traceparent}, *others)


class _Traced(stripe.HTTPClient):
    """The SDK's HTTP client, each call (its retries included) a span ``processor
    <operation>`` with the host, the status and Stripe's request id: never the body, the
    path's ids or the key."""

    name = "svc-traced"

    def __init__(self, inner: stripe.HTTPClient) -> None:
        super().__init__()
        self._inner = inner

    @contextmanager
    def _span(self, method: str, url: str) -> Iterator[None]:
        operation = operation_of(method, url)
        attributes = {
            "http.request.method": method.upper(),
            "server.address": urlsplit(url).hostname,
            "svc.processor": "stripe",
            "svc.processor.operation": operation,
        }
        with span(f"processor {operation}", **attributes):
            yield

    def _traced(
        self, call: Callable[..., _Answer], method: str, url: str, *rest: Any, usage: Any
    ) -> _Answer:
        """``call`` (one of the inner client's) inside its span, its answer noted on it."""
        with self._span(method, url):
            answer = call(method, url, *_with_traceparent(rest), _usage=usage)
            self._answered(answer[1], answer[2])
            return answer

    async def _traced_async(
        self,
        call: Callable[..., Awaitable[_Answer]],
        method: str,
        url: str,
        *rest: Any,
        usage: Any,
    ) -> _Answer:
        """:meth:`_traced`, awaited."""
        with self._span(method, url):
            answer = await call(method, url, *_with_traceparent(rest), _usage=usage)
            self._answered(answer[1], answer[2])
            return answer

    @staticmethod
    def _answered(status: int, headers: Mapping[str, str]) -> None:
        annotate(
            **{
                "http.response.status_code": status,
                "svc.processor.request_id": headers.get("request-id") or headers.get("Request-Id"),
            }
        )
        if status >= 400:
            failed(f"the processor answered {status}")

    def request_with_retries(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: Any = None,
        max_network_retries: int | None = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[str, int, Mapping[str, str]]:
        return self._traced(
            self._inner.request_with_retries,
            method,
            url,
            headers,
            post_data,
            max_network_retries,
            usage=_usage,
        )

    def request_stream_with_retries(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: Any = None,
        max_network_retries: int | None = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Mapping[str, str]]:
        return self._traced(
            self._inner.request_stream_with_retries,
            method,
            url,
            headers,
            post_data,
            max_network_retries,
            usage=_usage,
        )

    async def request_with_retries_async(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: Any = None,
        max_network_retries: int | None = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Any]:
        return await self._traced_async(
            self._inner.request_with_retries_async,
            method,
            url,
            headers,
            post_data,
            max_network_retries,
            usage=_usage,
        )

    async def request_stream_with_retries_async(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: Any = None,
        max_network_retries: int | None = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Any]:
        return await self._traced_async(
            self._inner.request_stream_with_retries_async,
            method,
            url,
            headers,
            post_data,
            max_network_retries,
            usage=_usage,
        )

    def close(self) -> None:
        self._inner.close()  # type: ignore[no-untyped-call]

    async def close_async(self) -> None:
        await self._inner.close_async()  # type: ignore[no-untyped-call]

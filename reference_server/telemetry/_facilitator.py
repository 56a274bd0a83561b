"""The x402 facilitator's calls, each a span (``facilitator verify``, ``facilitator
settle``): every HTTP client that talks to a facilitator is made by
:func:`facilitator_client`, so its transport is the one place those calls pass through."""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx

from ._tracing import annotate, current_traceparent, failed, span

__all__ = ["facilitator_client"]

#: The x402 facilitator API's operations (the last segment of the called path); any
#: other path is named ``call``, since a path the operator configured may hold a secret.
_OPERATIONS = frozenset({"verify", "settle", "supported"})


def facilitator_client(
    *, timeout: float, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncClient:
    """An HTTP client for a facilitator whose every call is a span of the current trace."""
    return httpx.AsyncClient(
        transport=_Traced(httpx.AsyncHTTPTransport(verify=verify)), timeout=timeout
    )


class _Traced(httpx.AsyncBaseTransport):
    """Wraps each request in a span with the host, the status and the facilitator's
    verdict (``isValid``, ``success``, and its reason code): never the payment payload,
    which carries the payer's signature."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        last = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        operation = last if last in _OPERATIONS else "call"
        attributes = {
            "http.request.method": request.method,
            "server.address": request.url.host,
            "svc.facilitator.operation": operation,
        }
        with span(f"facilitator {operation}", **attributes):
            traceparent = current_traceparent()
            if traceparent is not None:  # a facilitator that traces continues this trace
                request.headers["traceparent"] = traceparent
            response = await self._inner.handle_async_request(request)
            annotate(**{"http.response.status_code": response.status_code})
            if response.status_code >= 400:
                failed(f"the facilitator answered {response.status_code}")
                return response
            if operation in ("verify", "settle"):
                annotate(**_verdict(await response.aread()))
            return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _verdict(body: bytes) -> dict[str, Any]:
    """What the facilitator decided, from its answer (nothing when it is not JSON)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(answer, dict):
        return {}
    if "isValid" in answer:
        outcome = "valid" if answer["isValid"] else "invalid"
        reason = answer.get("invalidReason")
    elif "success" in answer:
        outcome = "settled" if answer["success"] else "refused"
        reason = answer.get("errorReason")
    else:
        return {}
    return {
        "svc.outcome": outcome,
        "svc.facilitator.reason": reason if isinstance(reason, str) else None,
    }

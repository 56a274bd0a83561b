"""``POST /spend/pay-url`` (pay any 402 URL) and ``GET /spend/attempts`` (wallet key).

``pay-url`` is not an :class:`~reference_server.api.endpoint.Endpoint`: the pipeline runs a
handler inside one transaction in a worker thread and retries it whole on a transient
database error, and a payment that awaits a third party's URL can have neither (see
:mod:`reference_server.payurl.flow`).  It is a plain async route that keeps the API's rules
with the API's own helpers -- the rate limit, the JSON body limits and nesting check, the
wallet-key authentication, the envelope and ``request_id``.  Its ``Idempotency-Key`` record
is the attempt itself (:mod:`reference_server.payurl.attempts`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from svc import PayUrlResult

from .. import outbound
from ..api import idempotency
from ..api.auth import Principal, Role, authenticate
from ..api.endpoint import Call, Endpoint
from ..api.errors import ApiError
from ..api.json_body import read_json_body
from ..api.paging import PageRequest, paged
from ..api.responses import Reply, error_response, json_response, to_json_body
from ..api.validate import Fields, checked
from ..context import ServerContext
from ..domain import wallets
from ..domain.errors import DomainError
from ..payurl import attempts, flow
from ..payurl.attempts import Order
from ..payurl.hot_wallet import hot_wallet
from .gates import rate_limit

__all__ = ["DOCUMENTED", "ENDPOINTS", "routes"]

log = logging.getLogger("reference_server")

PATH = "/spend/pay-url"
_MISSING = object()


async def pay_url(request: Request) -> Response:
    """Pay any x402/MPP 402 URL under the wallet key's policy; return the unlocked answer.

    The service probes the URL, pays its challenge from the environment's hot wallet,
    debits the prepaid balance, and returns the body (cut at 8 KB) and headers with the
    receipt and the transaction."""
    ctx: ServerContext = request.app.state.ctx
    request_id: str = request.state.request_id
    limit_headers: dict[str, str] = {}
    try:
        limit_headers = await rate_limit(request)
        body = await read_json_body(request, ctx.settings.max_body_bytes)
        order, fingerprint = _order(ctx, body)
        key = request.headers.get("idempotency-key")
        key = None if key is None else idempotency.validate_key(key)
        job = await anyio.to_thread.run_sync(_job, ctx, request.headers, order, request_id)
        answer = await flow.pay(job, idempotency_key=key, fingerprint=fingerprint)
        response = _respond(answer, request_id)
    except DomainError as exc:
        response = error_response(exc, request_id)
    except Exception:
        log.exception("unhandled error in POST %s (%s)", PATH, request_id)
        response = error_response(
            ApiError("internal_error", "The server failed; the request may be retried."),
            request_id,
        )
    for name, value in limit_headers.items():
        response.headers.setdefault(name, value)
    return response


def _order(ctx: ServerContext, body: Any) -> tuple[Order, str]:
    """The validated request, and its idempotency fingerprint."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ApiError("invalid_json", "The body must be a JSON object.")
    fields = dict(body)
    payload = fields.pop("json", _MISSING)
    f = Fields(fields)
    url = f.url("url", https_only=ctx.settings.production, required=True)
    method = f.string("method", choices=("GET", "POST")) or "GET"
    if payload is not _MISSING and payload is not None and method != "POST":
        f.error("json", "is sent with method POST only (a GET has no body)")
    f.done()
    url = checked(url)
    content = None if payload is _MISSING or payload is None else flow.encode_json(payload)
    order = Order(url=url, method=method, content=content, host=_host(ctx, url))
    return order, idempotency.request_fingerprint("POST", PATH, body)


def _host(ctx: ServerContext, url: str) -> str:
    """``host[:port]`` as a ``Host`` header names it (the port only when not the scheme's
    default): what a policy's ``allowed_hosts`` lists."""
    policy = outbound.OutboundPolicy.from_settings(ctx.settings)
    try:
        return outbound.check_url(url, policy).host_header
    except outbound.OutboundRefused:  # refused again, and recorded, when probed
        parts = urlsplit(url)
        return (parts.netloc.rpartition("@")[2] or "?").lower()[:255]


def _job(ctx: ServerContext, headers: Mapping[str, str], order: Order, request_id: str) -> flow.Job:
    """Authenticate the wallet key and load what paying needs (in a worker thread)."""
    ctx.load_secrets()
    now = ctx.now()
    with ctx.db.read() as conn:
        agent = authenticate(conn, headers, role=Role.WALLET, jwt_secrets=ctx.jwt_secrets, now=now)
        key = wallets.get_wallet_key(conn, checked(agent.subject_id))
    return flow.Job(
        ctx=ctx,
        agent=agent,
        key=key,
        wallet=hot_wallet(ctx, agent.environment),
        order=order,
        request_id=request_id,
    )


def _respond(answer: flow.Answer, request_id: str) -> Response:
    headers = {"Cache-Control": "no-store"}
    if answer.replay_of is not None:
        headers |= {"Idempotent-Replayed": "true", "Original-Request-Id": answer.replay_of}
    if isinstance(answer.result, PayUrlResult):
        return json_response(to_json_body(answer.result, request_id), 200, headers)
    error = answer.result
    response = error_response(error, request_id)
    response.headers.update(headers)
    return response


# --- GET /spend/attempts --------------------------------------------------------------------


@paged
def list_attempts(call: Call, request: PageRequest) -> Reply:
    """The wallet key's pay-url attempts, newest first (paged)."""
    wallet_key_id = checked(_agent(call).subject_id)
    return Reply(attempts.list_attempts(call.conn, request, wallet_key_id))


def _agent(call: Call) -> Principal:
    return checked(call.principal)


ENDPOINTS = [
    Endpoint(method="GET", path="/spend/attempts", handler=list_attempts, auth=Role.WALLET),
]


def routes() -> list[Route]:
    """``POST /spend/pay-url``, bare and under ``/api``."""
    return [Route(prefix + PATH, pay_url, methods=["POST"]) for prefix in ("", "/api")]


def _documented() -> Endpoint:
    def handler(call: Call) -> Reply:  # pragma: no cover - never routed
        raise AssertionError("served by reference_server.routes.pay_url")

    handler.__doc__ = pay_url.__doc__
    return Endpoint(
        method="POST", path=PATH, handler=handler, auth=Role.WALLET, idempotency="optional"
    )


#: What discovery lists for ``pay-url`` (served by the raw route above).
DOCUMENTED = [_documented()]

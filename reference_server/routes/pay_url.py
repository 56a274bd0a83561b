"""``POST /spend/pay-url`` (pay any 402 URL) and ``GET /spend/attempts`` (wallet key).

``pay-url`` has an async handler: a payment that awaits a third party's URL must hold
neither a transaction nor a worker thread across it, nor be retried whole on a transient
database error (see :mod:`reference_server.domain.pay_url.flow`), so the pipeline awaits it on the
event loop with no transaction.  The rate limit, the JSON body rules, the wallet-key
authentication, the envelope and ``request_id`` are the pipeline's; its ``Idempotency-Key``
(checked by the pipeline) is recorded by the attempt itself
(:mod:`reference_server.domain.pay_url.attempts`).
"""

from __future__ import annotations

from functools import partial
from urllib.parse import urlsplit

from sqlalchemy import Connection
from starlette.responses import Response

from svc import PayUrlQuote, PayUrlResult, SpendAttemptList
from svc.bodies import PayUrl

from .. import outbound
from ..context import ServerContext
from ..domain.errors import DomainError
from ..domain.pay_url import attempts, flow
from ..domain.pay_url.attempts import Order, Replay, Started
from ..domain.pay_url.hot_wallet import hot_wallet
from ..invariant import InvariantError
from ..web import idempotency
from ..web.auth import Principal, Role
from ..web.endpoint import Call, Endpoint
from ..web.paging import PageRequest, paged
from ..web.responses import Reply, error_response, json_response, to_json_body
from ..web.sdk import Sdk
from ..web.validate import checked

__all__ = ["ENDPOINTS", "PAY_URL"]

PATH = "/spend/pay-url"


async def pay_url(call: Call) -> Response:
    """Pay any x402/MPP 402 URL under the wallet key's policy; return the unlocked answer.

    The service probes the URL, pays its challenge from the environment's hot wallet,
    debits the prepaid balance, and returns the body (cut at 8 KB) and headers with the
    receipt and the transaction (a PayUrlResult).  With ``dry_run`` it only probes, and
    answers the rail and price it would pay and whether the wallet key's policy allows
    it (a PayUrlQuote): nothing is paid, reserved or recorded."""
    prepared = call.prepared
    if isinstance(prepared, flow.Job):
        return _respond_quote(await flow.quote(prepared), call.request_id)
    job, begun = prepared
    return _respond(await flow.pay(job, begun), call.request_id)


def _prepare(call: Call) -> flow.Job | tuple[flow.Job, Started | Replay]:
    """Blocking, in a worker thread before the handler: what a dry run needs, or the
    attempt begun in the transaction that authenticates the caller (and loads the key).

    The body as sent says which (``dry_run`` is a JSON ``true`` or it is not one: the
    body's shape is checked, after the credential, in either transaction)."""
    if call.body.get("dry_run") is True:
        with call.ctx.db.read() as conn:
            call.authenticate(conn)
        order, _ = _order(call)
        return _job(call, order)
    return flow.begin(call.ctx, read=partial(_request, call), request_id=call.request_id)


def _request(call: Call, conn: Connection) -> flow.PayRequest:
    """Authenticate the caller with ``conn`` and read what they ask to pay."""
    call.authenticate(conn)
    if call.input(PayUrl).dry_run:
        raise InvariantError("a dry run is prepared without beginning an attempt")
    order, fingerprint = _order(call)
    return flow.PayRequest(
        agent=_agent(call),
        order=order,
        idempotency_key=call.idempotency_key,
        fingerprint=fingerprint,
    )


def _order(call: Call) -> tuple[Order, str]:
    """The validated request, and its idempotency fingerprint."""
    b = call.input(PayUrl)
    method = b.method or "GET"
    content = None if b.json is None else flow.encode_json(b.json)
    order = Order(url=b.url, method=method, content=content, host=_host(call.ctx, b.url))
    # ``dry_run: false`` is the same request as no ``dry_run`` (a dry run records nothing).
    paid = {name: value for name, value in call.body.items() if name != "dry_run"}
    return order, idempotency.request_fingerprint("POST", PATH, paid)


def _host(ctx: ServerContext, url: str) -> str:
    """``host[:port]`` as a ``Host`` header names it (the port only when not the scheme's
    default): what a policy's ``allowed_hosts`` lists."""
    policy = outbound.OutboundPolicy.from_settings(ctx.settings)
    try:
        return outbound.check_url(url, policy).host_header
    except outbound.OutboundRefused:  # refused again, and recorded, when probed
        parts = urlsplit(url)
        return (parts.netloc.rpartition("@")[2] or "?").lower()[:255]


def _job(call: Call, order: Order) -> flow.Job:
    """Load what a dry run needs for the authenticated wallet key (blocking)."""
    agent = _agent(call)
    hot_wallet(call.ctx, agent.environment)  # may write its key: before the read opens
    with call.ctx.db.read() as conn:
        return flow.load_job(call.ctx, conn, agent=agent, order=order, request_id=call.request_id)


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


def _respond_quote(result: PayUrlQuote | DomainError, request_id: str) -> Response:
    headers = {"Cache-Control": "no-store"}
    if isinstance(result, PayUrlQuote):
        return json_response(to_json_body(result, request_id), 200, headers)
    response = error_response(result, request_id)
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
    Endpoint(
        method="GET",
        path="/spend/attempts",
        handler=list_attempts,
        auth=Role.WALLET,
        response=SpendAttemptList,
        sdk=Sdk(
            "spend.attempts",
            doc="""The key's ``pay-url`` attempts, newest first, with their status and error.""",
            all_doc="""Every ``pay-url`` attempt of the key, in the order of :meth:`attempts`.""",
        ),
    ),
]

#: ``POST /spend/pay-url`` (async: it awaits the URL it pays).
PAY_URL = Endpoint(
    method="POST",
    path=PATH,
    handler=pay_url,
    prepare=_prepare,
    prepare_authenticates=True,
    auth=Role.WALLET,
    idempotency="optional",
    body=PayUrl,
    response=(PayUrlResult, PayUrlQuote),
    errors=(
        # the wallet key's policy and balance
        "insufficient_funds",
        "max_per_tx_exceeded",
        "allowance_exceeded",
        "budget_exceeded",
        "rail_not_allowed",
        "host_not_allowed",
        # the URL and its challenge
        "url_not_allowed",
        "not_payable",
        "unsupported_challenge",
        "upstream_refused",
        "upstream_failed",
        "upstream_unavailable",
        "payment_unconfirmed",
        "conflict",
        "rails_not_configured",
    ),
    sdk=(
        Sdk(
            "spend.pay_url",
            "url: str, *, method: PayUrlMethod = 'GET', json: Any = None",
            doc="""Pay ``url``'s x402 or MPP 402 under the key's policy and return its answer.

            ``json`` is a JSON body for the URL (``method="POST"`` only).  The service probes
            the URL, pays on a rail the policy allows, and returns the unlocked body (cut at
            8 KB, ``body_truncated``) with ``receipt_id`` and ``tx_hash``.  An
            ``Idempotency-Key`` is sent and reused by retries, so a retried call pays once
            and gets the stored answer.  A policy limit raises
            :class:`~svc.PaymentRequiredError`; a URL that does not ask for payment, or asks
            in a way this environment cannot pay, :class:`~svc.UnprocessableEntityError`.
            """,
            build="pay_url_body",
            response=PayUrlResult,
        ),
        Sdk(
            "spend.pay_url_quote",
            "url: str, *, method: PayUrlMethod = 'GET', json: Any = None",
            doc="""A dry run of :meth:`pay_url`: probe ``url`` and say what paying it would do.

            Nothing is paid, reserved or recorded.  The answer names the ``rail``, ``amount``,
            ``network`` and ``pay_to`` the service would pay, whether the key's policy and
            balance allow it (``allowed``), and if not the rule that blocks it
            (``blocked_by.code``: ``max_per_tx_exceeded``, ``allowance_exceeded`` with
            ``details.next_reset_at``, ``budget_exceeded``, ``host_not_allowed``,
            ``rail_not_allowed``, ``insufficient_funds``) with its numbers in
            ``blocked_by.details``.  A URL that cannot be paid at all raises as
            :meth:`pay_url` does.
            """,
            build="pay_url_quote_body",
            response=PayUrlQuote,
        ),
    ),
)

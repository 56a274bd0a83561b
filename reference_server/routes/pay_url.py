"""``POST /spend/pay-url`` (pay any 402 URL) and ``GET /spend/attempts`` (wallet key).

``pay-url`` has an async handler: a payment that awaits a third party's URL must hold
neither a transaction nor a worker thread across it, nor be retried whole on a transient
database error (see :mod:`reference_server.domain.paid_fetch.flow`).  Its first step
(``_start``) runs in the transaction that authenticates the wallet key: it claims the
``Idempotency-Key`` and begins the attempt, which references it
(:mod:`reference_server.domain.paid_fetch.attempts`).
"""

from __future__ import annotations

from functools import partial
from typing import Any
from urllib.parse import urlsplit

import attrs
from sqlalchemy import Connection, Row
from starlette.responses import Response

from svc import Approval, PayUrlQuote, PayUrlResult, SpendAttemptList
from svc.bodies import PayUrl, to_json

from .. import outbound
from ..context import ServerContext
from ..crypto import SecretBox
from ..domain import approvals
from ..domain.errors import DomainError
from ..domain.paid_fetch import attempts, flow
from ..domain.paid_fetch.attempts import Order, Replay, Started
from ..domain.paid_fetch.hot_wallet import hot_wallet
from ..web import idempotency
from ..web.auth import Role
from ..web.endpoint import Call, Contract, Endpoint, Flow
from ..web.errors import ApiError, http_error
from ..web.paging import PageRequest, paged
from ..web.pipeline import replayed
from ..web.responses import Reply, error_response, json_response, to_json_body
from ..web.sdk import Sdk
from ..web.validate import checked
from .pay_url_stream import PayUrlStream

__all__ = ["ENDPOINTS", "PAY_URL"]

PATH = "/spend/pay-url"


async def pay_url(call: Call) -> Response:
    """Pay any x402/MPP 402 URL under the wallet key's policy; return the unlocked answer.

    The service probes the URL, pays its challenge from the environment's hot wallet,
    debits the prepaid balance, and returns the body (cut at 8 KB) and headers with the
    receipt and the transaction (a PayUrlResult).  With ``dry_run`` it only probes, and
    answers the rail and price it would pay and whether the wallet key's policy allows
    it (a PayUrlQuote): nothing is paid, reserved or recorded.  With ``stream`` the paid
    answer is relayed as it arrives, in NDJSON lines (see docs/pay-url.md, Streaming).
    A payment over the key's approval line answers 202 with an Approval: nothing is
    paid, the amount is held, and the repeat with the same ``Idempotency-Key`` pays once
    a person approved it (docs/approvals.md)."""
    started = call.started
    if isinstance(started, (Approval, DomainError)):  # it waits for a person, or was refused
        return _respond(started, call.request_id)
    if isinstance(started, flow.Job):
        return _respond(await flow.quote(started), call.request_id)
    if isinstance(started, idempotency.Replay):
        status, body, headers = replayed(started, call.request_id)
        return json_response(body, status, headers | _NO_STORE)
    job, begun = started
    if call.input(PayUrl).stream:
        return PayUrlStream(job, begun, call.request_id, partial(_answer, call.request_id))
    return _answer(call.request_id, await flow.pay(job, begun))


def _answer(request_id: str, answer: flow.Answer) -> Response:
    return _respond(answer.result, request_id, replay_of=answer.replay_of)


_NO_STORE = {"Cache-Control": "no-store"}


def _start(
    call: Call,
) -> flow.Job | idempotency.Replay | tuple[flow.Job, Started | Replay] | Approval | DomainError:
    """The flow's first step, in the transaction that authenticated the caller: what a
    dry run needs; or the key claimed and the attempt begun (or the key's stored answer).
    A key whose request waits for a person's approval is answered from the approval
    first (202 while pending, its 402 once declined or expired), never from the key's
    record: the approved repeat claims the key and pays."""
    order, fingerprint = _order(call)
    agent = call.caller
    wallet = hot_wallet(call.ctx, agent.environment)  # or refuse: live with none configured
    job = flow.load_job(
        call.ctx, call.conn, agent=agent, order=order, wallet=wallet, request_id=call.request_id
    )
    if call.input(PayUrl).dry_run:
        return job  # records nothing, its key neither
    record: idempotency.Begun | None = None
    if call.key is not None:
        resumed = approvals.resume(
            call.conn,
            call.ctx,
            key_id=job.key.id,
            route="pay_url",
            idempotency_key=call.key.key,
            fingerprint=fingerprint,
            public_url=call.public_url,
            now=call.ctx.now(),
        )
        if isinstance(resumed, (Approval, DomainError)):
            return resumed
        # Kept for good: a key never pays twice.
        want = attrs.evolve(call.key, fingerprint=fingerprint, ttl=None)
        try:
            claimed = idempotency.claim(call.conn, want, call.ctx.box)
        except ApiError as taken:  # still running, or another request: name its attempt
            named = attempts.named_by(call.conn, scope=want.scope, route=want.route, key=want.key)
            if named is not None:
                taken.details = {**(taken.details or {}), "attempt_id": named}
            raise
        if isinstance(claimed, idempotency.Replay):
            return claimed
        record = claimed
        terms = flow.ApprovalTerms(
            idempotency_key=call.key.key,
            fingerprint=fingerprint,
            public_url=call.public_url,
            approved=None if resumed is None else resumed.id,
            on_request=partial(idempotency.lapse, begun=record),
        )
        job = attrs.evolve(
            job, on_answer=partial(_store_answer, record, call.ctx.box), approval=terms
        )
    record_id = None if record is None else record.record_id
    begun = flow.begin(call.conn, job, record_id=record_id, fingerprint=fingerprint)
    if record is not None and isinstance(begun, Replay):
        idempotency.lapse(call.conn, record)  # the attempt answers until it has ended
    return job, begun


def _store_answer(
    claimed: idempotency.Begun,
    box: SecretBox,
    conn: Connection,
    row: Row[Any],
    result: PayUrlResult | DomainError,
) -> None:
    """Store the ended attempt's answer under its key (sealed: it holds the unlock body);
    a pending one leaves the key to its attempt, which answers until the chain decides."""
    if row.status not in ("succeeded", "failed"):
        idempotency.lapse(conn, claimed)
        return
    if isinstance(result, PayUrlResult):
        status, body = 200, to_json_body(result, row.request_id)
    else:
        error = http_error(result)
        status, body = error.status, error.body(row.request_id)
    idempotency.complete(conn, claimed, status, body, box=box)


def _order(call: Call) -> tuple[Order, str]:
    """The validated request, and its idempotency fingerprint."""
    b = call.input(PayUrl)
    # ``dry_run: false`` is the same request as no ``dry_run`` (a dry run records nothing);
    # ``stream`` only says how the answer is delivered: the same payment either way.
    sent = to_json(attrs.evolve(b, dry_run=None, stream=None))
    method = b.method or "GET"
    content = None if b.json is None else flow.encode_json(b.json)
    order = Order(url=b.url, method=method, content=content, host=_host(call.ctx, b.url))
    return order, idempotency.request_fingerprint("POST", PATH, sent)


def _host(ctx: ServerContext, url: str) -> str:
    """``host[:port]`` as a ``Host`` header names it (the port only when not the scheme's
    default): what a policy's ``allowed_hosts`` lists."""
    policy = outbound.OutboundPolicy.from_settings(ctx.settings)
    try:
        return outbound.check_url(url, policy).host_header
    except outbound.OutboundRefused:  # refused again, and recorded, when probed
        parts = urlsplit(url)
        return (parts.netloc.rpartition("@")[2] or "?").lower()[:255]


def _respond(
    result: PayUrlResult | PayUrlQuote | DomainError | Approval,
    request_id: str,
    *,
    replay_of: str | None = None,
) -> Response:
    headers = dict(_NO_STORE)
    if replay_of is not None:
        headers |= {"Idempotent-Replayed": "true", "Original-Request-Id": replay_of}
    if isinstance(result, Approval):  # nothing paid: a person must decide first
        return json_response(to_json_body(result, request_id), 202, headers)
    if not isinstance(result, DomainError):
        return json_response(to_json_body(result, request_id), 200, headers)
    response = error_response(result, request_id)
    response.headers.update(headers)
    return response


# --- GET /spend/attempts --------------------------------------------------------------------


@paged
def list_attempts(call: Call, request: PageRequest) -> Reply:
    """The wallet key's pay-url attempts, newest first (paged)."""
    wallet_key_id = checked(call.caller.subject_id)
    return Reply(attempts.list_attempts(call.conn, request, wallet_key_id))


ENDPOINTS = [
    Endpoint(
        method="GET",
        path="/spend/attempts",
        handler=list_attempts,
        auth=Role.WALLET,
        contract=Contract(response=SpendAttemptList),
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
    run=Flow(start=_start),
    auth=Role.WALLET,
    idempotency="optional",
    body=PayUrl,
    contract=Contract(
        response=(PayUrlResult, PayUrlQuote),
        errors=(
            # the wallet key's policy and balance
            "insufficient_funds",
            "max_per_tx_exceeded",
            "allowance_exceeded",
            "budget_exceeded",
            "rail_not_allowed",
            "host_not_allowed",
            # a person's approval (docs/approvals.md)
            "idempotency_key_required",
            "idempotency_key_reused",
            "approval_declined",
            "approval_expired",
            "approval_amount_exceeded",
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
    ),
    sdk=(
        Sdk(
            "spend.pay_url",
            "url: str, *, method: PayUrlMethod = 'GET', json: Any = None, stream: bool = False",
            doc="""Pay ``url``'s x402 or MPP 402 under the key's policy and return its answer.

            ``json`` is a JSON body for the URL (``method="POST"`` only).  The service probes
            the URL, pays on a rail the policy allows, and returns the unlocked body (cut at
            8 KB, ``body_truncated``) with ``receipt_id`` and ``tx_hash``.  An
            ``Idempotency-Key`` is sent and reused by retries, so a retried call pays once
            and gets the stored answer.  A policy limit raises
            :class:`~svc.PaymentRequiredError`; a URL that does not ask for payment, or asks
            in a way this environment cannot pay, :class:`~svc.UnprocessableEntityError`.
            A payment over the key's approval line raises :class:`~svc.ApprovalRequired`:
            show its ``approval.approval_url`` to a person, then call again with the same
            ``RequestOptions(idempotency_key=...)`` (docs/approvals.md).

            ``stream=True`` returns, once the paid answer's head is in, a stream to iterate
            for the body's bytes as they arrive (uncut); after it, ``.result`` is the
            PayUrlResult (without the body) and ``.head`` the URL's status and headers.  An
            answer that breaks off midway raises the service's error at its end; use it as a
            context manager to close the connection.  Errors before the head raise here.
            """,
            build="pay_url_body",
            response=PayUrlResult,
            sdk_only=("stream",),
            send="send_pay_url",
            streams="AsyncPayUrlStream",
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

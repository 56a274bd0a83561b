"""``POST /spend/pay-url`` from start to finish, one phase after another.

    begin (idempotency) → probe → sign → reserve → pay → did it settle? → conclude

The phases that touch the database are short transactions in worker threads
(:func:`_write`); the ones that touch the network are awaited with no transaction open and
no thread held.  Between two network waits there is one worker-thread hop and at most one
write transaction: authenticating the caller, loading the wallet key and beginning the
attempt (:func:`begin`, the route's first step); signing and reserving; the chain's
verdict, concluding and reading the answer.  That matters beyond throughput:
the paid URL may call back into this very server before it answers (in ``test`` its
facilitator *is* ``/sandbox/x402`` here), and a request holding a transaction or a worker
thread across that wait could deadlock with it.
For the same reason nothing here is retried as a whole: a transient database error retries
one short transaction, never the payment.

Every way out leaves the attempt in a final state, or, if the process dies, in one a later
retry of the same ``Idempotency-Key`` can finish (``attempts.STALE_AFTER``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread
import attrs
from sqlalchemy import Connection, Row

from svc import Approval, ErrorDetail, PayUrlQuote, PayUrlResult
from svc.money import from_micros

from ... import metrics, outbound, receipt_tokens
from ...context import ServerContext
from ...crypto import SecretBox
from ...invariant import InvariantError
from ...store.database import in_transaction
from .. import approvals, ledger, wallets
from ..errors import DomainError, PaymentRefused
from ..principal import Principal
from . import attempts, offers, settlement
from .attempts import Order, Replay, Started
from .confirmation import confirmed_on_chain, confirmed_transaction, settled_amount
from .hot_wallet import HotWallet
from .offers import SignedPayment
from .settlement import Reservation, Verdict
from .unlocked import Unlocked, end_to_end, unlocked

__all__ = ["Answer", "Job", "Relay", "begin", "encode_json", "load_job", "pay", "quote"]

T = TypeVar("T")

#: Seconds for the probe and for the paid request, each end to end (resolution, connect,
#: send, read).  The paid request waits for the URL's own verify and settle.
PROBE_SECONDS = 15.0
PAID_SECONDS = 30.0
#: How much of a 402's body is read (an x402 v1 challenge is the body).
PROBE_MAX_BYTES = 64 * 1024
#: The most a streamed answer (``stream``) may send in all; past it the stream breaks off.
STREAM_MAX_BYTES = 64 * 1024 * 1024
#: Probes to try when another attempt holds the nonce of the challenge we got.
_NONCE_TRIES = 3
_TRANSIENT_RETRIES = 3


class Relay(Protocol):
    """Where a streamed ``pay-url`` writes the paid answer as it arrives (``stream``):
    its head once, then each chunk; the money's phases run after the last one."""

    async def head(self, status: int, headers: dict[str, str]) -> None: ...

    async def chunk(self, data: bytes) -> None: ...

    def broke_off(self, error: DomainError) -> None:
        """The relayed answer broke off midway with ``error`` (told before concluding)."""


@attrs.frozen(kw_only=True)
class ApprovalTerms:
    """How this request meets its policy's approval line (docs/approvals.md): with an
    ``Idempotency-Key``, a payment over it asks a person and answers 202; ``approved``
    names the approval a person gave this very request (a repeat), whose hold it pays."""

    idempotency_key: str
    fingerprint: str
    public_url: str
    approved: str | None = None
    #: Called in the transaction that asks: the key's record is released, so the repeat
    #: begins a new attempt (the 202 is never the key's stored answer).
    on_request: Callable[[Connection], None] | None = None


@attrs.frozen(kw_only=True)
class Job:
    """One ``pay-url`` request, authenticated and validated."""

    ctx: ServerContext
    agent: Principal
    #: The wallet key's row as authenticated (its policy orders the rails; every limit is
    #: checked again, under lock, when the money is reserved).
    key: Row[Any]
    wallet: HotWallet
    order: Order
    request_id: str
    #: Stores the attempt's answer under its ``Idempotency-Key``, in the transaction that
    #: ends the attempt (the route's, which claimed the key; ``None``: no key).
    on_answer: Callable[[Connection, Row[Any], PayUrlResult | DomainError], None] | None = None
    #: Set: a successful paid answer is relayed as it arrives (:func:`_streamed`).
    relay: Relay | None = None
    #: ``None``: no ``Idempotency-Key``, so a payment over the approval line is refused.
    approval: ApprovalTerms | None = None


@attrs.frozen(kw_only=True)
class Answer:
    #: An :class:`~svc.Approval`: nothing was paid, a person must decide (202).
    result: PayUrlResult | DomainError | Approval
    #: The first request's id, when this answer is an ``Idempotency-Key`` replay.
    replay_of: str | None = None


def load_job(
    ctx: ServerContext,
    conn: Connection,
    *,
    agent: Principal,
    order: Order,
    wallet: HotWallet,
    request_id: str,
) -> Job:
    """What paying needs for the authenticated wallet key, read with ``conn`` (the
    route's first transaction, which authenticated the caller)."""
    if agent.subject_id is None:
        raise InvariantError("expected agent.subject_id is not None")
    return Job(
        ctx=ctx,
        agent=agent,
        key=wallets.get_wallet_key(conn, agent.subject_id),
        wallet=wallet,
        order=order,
        request_id=request_id,
    )


def begin(
    conn: Connection, job: Job, *, record_id: int | None, fingerprint: str
) -> Started | Replay:
    """Begin the attempt in ``conn``, the transaction that authenticated the caller and
    loaded the wallet key (the route's first step): one transaction, one commit."""
    _commit_without_waiting_for_the_disk(conn)
    return attempts.begin(
        conn,
        agent=job.agent,
        order=job.order,
        record_id=record_id,
        fingerprint=fingerprint,
        request_id=job.request_id,
        now=job.ctx.now(),
    )


def _commit_without_waiting_for_the_disk(conn: Connection) -> None:
    """PostgreSQL: this transaction's commit returns before its WAL reaches the disk
    (``synchronous_commit`` off, for it alone), saving a flush -- about half a
    millisecond here -- on every pay-url.  Safe for beginning an attempt: nothing is
    reserved or sent with money yet, and the next step that is (the reservation, or the
    failure that ends the attempt) commits synchronously, which flushes the WAL up to
    its own commit, this one's included.  A database crash in between can only lose an
    attempt that never got further than its probe, and whose caller got no answer.
    SQLite commits with ``synchronous=NORMAL`` (no flush per commit) already."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")


async def pay(job: Job, begun: Started | Replay) -> Answer:
    """Run the attempt :func:`begin` began (or answer the one it found) to its answer."""
    if isinstance(begun, Replay):
        if begun.stale:
            await _conclude_abandoned(job, begun.attempt_id)
        answered = await _read(job.ctx, partial(_answered, job.ctx), begun.attempt_id)
        return Answer(result=answered.outcome(job.ctx.box), replay_of=answered.row.request_id)
    try:
        done = await _run(job, begun.attempt_id)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _conclude_abandoned(job, begun.attempt_id)
        raise
    if isinstance(done, Approval):
        return Answer(result=done)
    if done is None:
        done = await _read(job.ctx, partial(_answered, job.ctx), begun.attempt_id)
    return Answer(result=done.outcome(job.ctx.box))


@attrs.frozen
class _Answered:
    """An attempt row as answered."""

    row: Row[Any]
    #: The seller's receipt id, when known (:func:`~.attempts.seller_receipt_id`).
    seller_receipt: str | None
    #: The answer's body, when this request sealed it into the row in the transaction
    #: that read it: the answer is rendered from it rather than opened again.
    body: str | None = None
    #: The payer's receipt signed (:func:`~reference_server.receipt_tokens.token_for`).
    receipt_token: str | None = None

    def outcome(self, box: SecretBox) -> PayUrlResult | DomainError:
        return attempts.outcome(
            self.row,
            box,
            seller_receipt=self.seller_receipt,
            body=self.body,
            receipt_token=self.receipt_token,
        )


async def _run(job: Job, attempt_id: str) -> _Answered | Approval | None:
    """Run the attempt to a final state; the answer when the last transaction read it."""
    try:
        wallets.check_host(job.key, job.order.host)
    except PaymentRefused as refused:  # before anything is sent to a host the key may not pay
        return await _fail(job, attempt_id, refused, payment_failed=True)
    for _ in range(_NONCE_TRIES):
        probe = await _send(job, policy=_policy(job, PROBE_SECONDS, PROBE_MAX_BYTES))
        if isinstance(probe, outbound.OutboundError):
            return await _fail(job, attempt_id, _transport_error(job, probe, "nothing was paid"))
        if probe.status != 402:
            return await _fail(
                job, attempt_id, _not_payable(job, probe.status), response_status=probe.status
            )
        reserved = await anyio.to_thread.run_sync(_sign_and_reserve, job, attempt_id, probe)
        if reserved is None:
            return await _fail(job, attempt_id, _unsupported(job), response_status=402)
        signed, reservation = reserved
        if isinstance(reservation, Approval):
            return reservation
        if reservation is Reservation.REFUSED:  # recorded: its answer, under the key
            return await _write(
                job.ctx, lambda conn: _recorded(job, conn, _answered(job.ctx, conn, attempt_id))
            )
        if reservation is Reservation.RESERVED:
            return await _pay_and_conclude(job, attempt_id, signed)
    return await _fail(
        job,
        attempt_id,
        DomainError(
            "conflict",
            f"{job.order.host} kept offering a challenge another payment is using; "
            "nothing was paid. Retry shortly.",
        ),
    )


def _ask(
    job: Job,
    terms: ApprovalTerms,
    attempt_id: str,
    signed: SignedPayment,
    now: datetime,
    conn: Connection,
) -> Approval:
    """Hold the amount and ask a person (:func:`~..approvals.request`); the attempt,
    which paid nothing, is removed with its claim on the key: the approved repeat begins
    its own."""
    ask = approvals.Ask(
        route="pay_url",
        idempotency_key=terms.idempotency_key,
        fingerprint=terms.fingerprint,
        amount=signed.amount,
        rail=signed.rail,
        url=job.order.url,
        method=job.order.method,
        host=job.order.host,
        credit=(ledger.CHAIN_PAYOUTS, ledger.platform_shard()),
        request_id=job.request_id,
        public_url=terms.public_url,
    )
    asked = approvals.request(conn, job.ctx, key_id=job.key.id, ask=ask, now=now)
    attempts.remove(conn, attempt_id)
    if terms.on_request is not None:
        terms.on_request(conn)
    return asked


def _sign_and_reserve(
    job: Job, attempt_id: str, probe: outbound.OutboundResponse
) -> tuple[SignedPayment, Reservation | Approval] | None:
    """Blocking, in one worker thread: sign the probe's challenge, then reserve what the
    credential pays (``None``: no offer the environment can pay).  Nothing between the two
    touches the network, so one thread hop serves both; the signature is made before the
    transaction opens, so no lock waits on the ECDSA work."""
    signed = _sign_blocking(job, probe)
    if signed is None:
        return None
    now = job.ctx.now()
    terms = job.approval
    try:
        in_transaction(
            job.ctx,
            True,
            partial(
                settlement.reserve,
                attempt_id=attempt_id,
                wallet=job.wallet,
                signed=signed,
                now=now,
                approved=None if terms is None else terms.approved,
                can_ask=terms is not None,
            ),
        )
    except settlement.NonceTaken:
        return signed, Reservation.NONCE_TAKEN
    except settlement.NeedsApproval:
        if terms is None:
            raise InvariantError("only a request with a key is asked to wait") from None
        try:
            asked = in_transaction(
                job.ctx, True, partial(_ask, job, terms, attempt_id, signed, now)
            )
        except DomainError as refused:  # the policy changed meanwhile: refused as usual
            _record_refusal(job, attempt_id, signed, refused, now)
            return signed, Reservation.REFUSED
        return signed, asked
    except DomainError as refused:
        _record_refusal(job, attempt_id, signed, refused, now)
        return signed, Reservation.REFUSED
    return signed, Reservation.RESERVED


def _record_refusal(
    job: Job, attempt_id: str, signed: SignedPayment, refused: DomainError, now: datetime
) -> None:
    in_transaction(
        job.ctx,
        True,
        partial(
            settlement.record_refusal,
            attempt_id=attempt_id,
            signed=signed,
            refused=refused,
            request_id=job.request_id,
            now=now,
        ),
    )


async def _pay_and_conclude(job: Job, attempt_id: str, signed: SignedPayment) -> _Answered:
    limit = job.ctx.settings.unlock_body_max_bytes
    broke: outbound.OutboundFailed | None = None
    if job.relay is None:
        answer = await _send(job, policy=_policy(job, PAID_SECONDS, limit), credential=signed)
    else:
        answer, broke = await _streamed(job, job.relay, signed, limit)
    cancelled = "the payment was cancelled and nothing was charged"
    if isinstance(answer, outbound.OutboundError):
        got, failure = None, _transport_error(job, answer, cancelled)
    else:
        got = unlocked(answer.status, answer.headers, answer.body, answer.truncated)
        failure = _not_settled_after_paying(job, got)
        if broke is not None and job.relay is not None:  # midway through a relayed answer
            failure = _broke_off(job, broke)
            job.relay.broke_off(failure)
    if job.wallet.sandbox:  # the chain's verdict, in the transaction that concludes
        return await _conclude(
            job, attempt_id, None, None, got, failure, signed.payer, signed.nonce
        )
    verdict, tx_hash, failure = _verdict(job, signed, answer, failure)
    settled = _settled_amount(signed, answer)
    if tx_hash is not None and not await _on_chain(job, signed, tx_hash, settled):
        verdict = Verdict.UNKNOWN  # the URL's receipt names no such transfer: not posted
    return await _conclude(job, attempt_id, verdict, tx_hash, got, failure, settled=settled)


async def _streamed(
    job: Job, relay: Relay, signed: SignedPayment, limit: int
) -> tuple[outbound.OutboundResponse | outbound.OutboundError, outbound.OutboundFailed | None]:
    """The paid request, its successful answer relayed to ``relay`` chunk by chunk as it
    arrives; what concluding needs from it (its head and first ``limit`` bytes, as the
    buffered mode keeps); and the failure that broke it off midway, if one did.

    An answer that is not a success is read (bounded) and not relayed: its error is
    answered as the buffered mode answers it."""
    started = time.monotonic()
    try:
        async with outbound.stream(
            job.order.method,
            job.order.url,
            headers=_headers(job, signed),
            content=job.order.content,
            policy=_policy(job, PAID_SECONDS, STREAM_MAX_BYTES),
        ) as answer:
            relaying = 200 <= answer.status < 300
            if relaying:
                await relay.head(answer.status, end_to_end(answer.headers))
            body, truncated, broke = await _body(answer, relay if relaying else None, limit)
            got = outbound.OutboundResponse(
                status=answer.status,
                headers=answer.headers,
                body=body,
                truncated=truncated,
                elapsed=time.monotonic() - started,
                ip=answer.ip,
            )
            return got, broke
    except outbound.OutboundError as exc:
        return exc, None


async def _body(
    answer: outbound.OutboundStream, relay: Relay | None, limit: int
) -> tuple[bytes, bool, outbound.OutboundFailed | None]:
    """``answer``'s body, each chunk passed to ``relay`` as it arrives: its first ``limit``
    bytes, whether there was more, and the failure that broke it off (without a relay,
    reading stops past ``limit`` and a failure is raised)."""
    kept, read = bytearray(), 0
    try:
        async for chunk in answer.chunks():
            read += len(chunk)
            kept += chunk[: max(limit - len(kept), 0)]
            if relay is not None:
                await relay.chunk(chunk)
            elif read > limit:
                break
    except outbound.OutboundFailed as exc:
        if relay is None:
            raise
        return bytes(kept), True, exc
    return bytes(kept), read > limit, None


def _settled_amount(
    signed: SignedPayment, answer: outbound.OutboundResponse | outbound.OutboundError
) -> int | None:
    """``live``, metered: what the URL's settlement receipt says moved, at most the signed
    maximum (``None``: a fixed price, or no word, which counts as the maximum)."""
    if not signed.metered or isinstance(answer, outbound.OutboundError):
        return None
    claimed = settled_amount(answer.headers)
    return None if claimed is None else min(claimed, signed.amount)


def _verdict(
    job: Job,
    signed: SignedPayment,
    answer: outbound.OutboundResponse | outbound.OutboundError,
    failure: DomainError,
) -> tuple[Verdict, str | None, DomainError]:
    """``live``: did the payment settle (and the error to end with if it did not)?

    Only the URL's settlement receipt says; a request the SSRF rules stopped was never
    sent, and anything else unconfirmed stays ``pending``.  (``test`` asks the sandbox
    chain instead, in :func:`_conclude`.)
    """
    if isinstance(answer, outbound.OutboundRefused):
        return Verdict.NOT_SETTLED, None, failure
    if isinstance(answer, outbound.OutboundError):
        return Verdict.UNKNOWN, None, _unconfirmed(job, None, signed.valid_before)
    tx_hash = confirmed_transaction(signed.rail, answer.headers)
    verdict = Verdict.SETTLED if tx_hash else Verdict.UNKNOWN
    return verdict, tx_hash, _unconfirmed(job, answer.status, signed.valid_before)


async def _on_chain(job: Job, signed: SignedPayment, tx_hash: str, settled: int | None) -> bool:
    """``live`` with a node (``live_rpc_url``): the chain confirms the URL's receipt (and,
    metered, the amount it claims moved); without one, the receipt is the only word."""
    settings = job.ctx.settings
    if not settings.live_rpc_url:
        return True
    return await anyio.to_thread.run_sync(
        partial(
            confirmed_on_chain,
            settings.live_rpc_url,
            job.wallet.token.address,
            tx_hash,
            sender=signed.payer,
            receiver=signed.pay_to,
            value=signed.amount if settled is None else settled,
        )
    )


async def _conclude(
    job: Job,
    attempt_id: str,
    verdict: Verdict | None,
    tx_hash: str | None,
    answer: Unlocked | None,
    failure: DomainError,
    payer: str | None = None,
    nonce: str | None = None,
    settled: int | None = None,
) -> _Answered:
    """Conclude the attempt and read its answer, in one transaction.

    With no ``verdict`` (``test``) the sandbox chain gives it first, in the same
    transaction: did the authorization of ``payer``'s ``nonce`` settle?  One that did not
    is cancelled there, so that it never can.  The attempt and the wallet key are locked
    before the chain is asked (the order every pay-url transaction takes: wallet key, then
    the chain and the ledger).
    """

    def run(conn: Connection) -> _Answered:
        nonlocal verdict, tx_hash, settled
        now = job.ctx.now()
        row = None
        if verdict is None:
            row = attempts.get_to_conclude(conn, attempt_id)  # and its wallet key, locked
            if payer is None or nonce is None:
                raise InvariantError("the chain's verdict needs the payer and the nonce")
            verdict, tx_hash, settled = settlement.chain_verdict(
                conn, payer=payer, nonce=nonce, now=now
            )
        concluded = settlement.conclude(
            conn,
            attempt_id=attempt_id,
            verdict=verdict,
            tx_hash=tx_hash,
            answer=answer,
            failure=failure,
            box=job.ctx.box,
            request_id=job.request_id,
            now=now,
            locked=row,
            settled_amount=settled,
        )
        if concluded is None:  # by a racing retry: read what it concluded
            return _recorded(job, conn, _answered(job.ctx, conn, attempt_id))
        body = None if answer is None else answer.body
        return _recorded(job, conn, _answer_of(job.ctx, conn, concluded, body=body))

    return await _write(job.ctx, run)


async def _conclude_abandoned(job: Job, attempt_id: str) -> None:
    """Finish an attempt whose run broke off (an unexpected error, or a process that died
    and left it for a retry): before reserving, it failed; after, the chain decides."""
    row = await _read(job.ctx, attempts.get, attempt_id)
    if row.status == "probing":
        error = DomainError(
            "internal_error", "The attempt broke off inside the service; nothing was paid."
        )
        await _fail(job, attempt_id, error)
        return
    if row.status != "paying":
        return
    failure = DomainError(
        "upstream_unavailable",
        "The attempt broke off while paying; the payment was cancelled and nothing was charged.",
        details={"host": row.host},
    )
    if job.wallet.sandbox:
        await _conclude(job, attempt_id, None, None, None, failure, row.payer, row.nonce)
    else:
        await _conclude(job, attempt_id, Verdict.UNKNOWN, None, None, _unconfirmed(job, None))


# --- the dry run ----------------------------------------------------------------------------


async def quote(job: Job) -> PayUrlQuote | DomainError:
    """``dry_run``: the offer ``pay`` would pay and whether the policy allows it.

    The same steps as :func:`pay` up to the reservation -- host, probe, choose and sign --
    and no further: the credential is signed in memory and dropped (never sent, nothing
    reserved), the policy and balance are read, not charged, and no attempt is written.
    """
    order = job.order
    try:
        wallets.check_host(job.key, order.host)
    except PaymentRefused as host_refused:  # the host is not asked, as when paying
        return _quote(job, host_refused)
    probe = await _send(job, policy=_policy(job, PROBE_SECONDS, PROBE_MAX_BYTES))
    if isinstance(probe, outbound.OutboundError):
        return _transport_error(job, probe, "nothing was paid")
    if probe.status != 402:
        return _not_payable(job, probe.status)
    signed = await anyio.to_thread.run_sync(_sign_blocking, job, probe)
    if signed is None:
        return _unsupported(job)

    def check() -> PaymentRefused | None:
        with job.ctx.db.read() as conn:
            key = wallets.get_wallet_key(conn, job.key.id)
            return wallets.would_refuse(
                conn, key, signed.amount, rail=signed.rail, host=order.host, now=job.ctx.now()
            )

    refused = await anyio.to_thread.run_sync(check)
    return _quote(job, refused, signed)


def _quote(
    job: Job, refused: PaymentRefused | None, signed: SignedPayment | None = None
) -> PayUrlQuote:
    blocked = None
    if refused is not None:
        blocked = ErrorDetail(code=refused.code, message=refused.message, details=refused.details)
    return PayUrlQuote(
        url=job.order.url,
        host=job.order.host,
        allowed=refused is None,
        rail=None if signed is None else signed.rail,
        amount=None if signed is None else from_micros(signed.amount),
        max_amount=None if signed is None or not signed.metered else from_micros(signed.amount),
        metered=signed is not None and signed.metered,
        network=None if signed is None else signed.network,
        pay_to=None if signed is None else signed.pay_to,
        blocked_by=blocked,
    )


# --- the network ----------------------------------------------------------------------------


def _policy(job: Job, seconds: float, max_bytes: int) -> outbound.OutboundPolicy:
    settings = job.ctx.settings
    return outbound.OutboundPolicy.from_settings(
        settings,
        resolver=settings.outbound_resolver,
        connect_timeout=min(5.0, seconds),
        read_timeout=seconds,
        total_timeout=seconds,
        max_response_bytes=max_bytes,
        max_request_bytes=max(settings.max_body_bytes, 1),
        user_agent="svc-pay-url",
    )


#: Kept-alive outbound connections per event loop (a pool's clients belong to the loop
#: they were made on), each reused only for the same checked name and address.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, outbound.AsyncPinnedClients] = (
    weakref.WeakKeyDictionary()
)


def _pool() -> outbound.AsyncPinnedClients:
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = outbound.AsyncPinnedClients(size=32, connections=16)
    return pool


async def _send(
    job: Job, *, policy: outbound.OutboundPolicy, credential: SignedPayment | None = None
) -> outbound.OutboundResponse | outbound.OutboundError:
    """The caller's request to the URL (with the credential, for the paid one).

    ``OutboundRefused``: the SSRF rules forbid it and nothing was sent;
    ``OutboundFailed``: it was tried and got no answer (it may have arrived).
    """
    order = job.order
    began = time.perf_counter()
    try:
        answer = await outbound.send(
            order.method,
            order.url,
            headers=_headers(job, credential),
            content=order.content,
            policy=policy,
            # The probe and the paid request go to one origin: the second reuses the
            # first's connection (to the same checked address), as x402's client does.
            pool=_pool(),
        )
    except outbound.OutboundRefused as exc:
        return exc  # nothing was sent
    except outbound.OutboundError as exc:
        metrics.observe_upstream("no_answer", time.perf_counter() - began)
        return exc
    metrics.observe_upstream(f"{answer.status // 100}xx", time.perf_counter() - began)
    return answer


def _headers(job: Job, credential: SignedPayment | None) -> list[tuple[str, str]]:
    """The headers of the caller's request to the URL (the paid one's with the credential)."""
    headers = [("Accept", "*/*")]
    if job.order.content is not None:
        headers.append(("Content-Type", "application/json"))
    if credential is not None:
        headers.append((credential.header, credential.value))
    return headers


_thread_loops = threading.local()


def _sign_blocking(job: Job, probe: outbound.OutboundResponse) -> SignedPayment | None:
    """Sign, blocking (call it in a worker thread): an ECDSA signature is milliseconds of
    pure-Python CPU (about 3 ms here) that would otherwise stall every request this process
    serves.  The SDKs' signing is synchronous code behind async signatures, so the thread
    runs it on an event loop of its own, kept for the thread's next signature (making one
    per call costs about half a millisecond)."""
    loop = getattr(_thread_loops, "loop", None)
    if loop is None:
        loop = _thread_loops.loop = asyncio.new_event_loop()
    return loop.run_until_complete(offers.sign_payment(job.wallet, probe, _rail_order(job.key)))


def _rail_order(key: Row[Any]) -> list[str]:
    """The rails to try: those the policy allows first (x402 before MPP), then the rest,
    so that a URL offering only a disallowed rail is refused as ``rail_not_allowed``."""
    allowed = key.allowed_rails
    first = [r for r in offers.RAIL_PREFERENCE if allowed is None or r in allowed]
    return first + [r for r in offers.RAIL_PREFERENCE if r not in first]


# --- how it can fail ------------------------------------------------------------------------


def _not_payable(job: Job, status: int) -> DomainError:
    return DomainError(
        "not_payable",
        f"{job.order.host} answered {status}, not 402 Payment Required: there is nothing to "
        "pay, and nothing was paid (fetch it directly).",
        details={"upstream_status": status},
    )


def _unsupported(job: Job) -> DomainError:
    token = job.wallet.token
    return DomainError(
        "unsupported_challenge",
        f"{job.order.host} asks for payment, but in no way the {job.wallet.environment} "
        f"environment pays: pay-url pays x402 'exact' (EIP-3009) and 'upto' (Permit2) and MPP "
        f"'evm' charges of "
        f"{token.symbol} {token.address} on {token.network}. Nothing was paid.",
        details={"upstream_status": 402, "network": token.network, "asset": token.address},
    )


def _not_settled_after_paying(job: Job, got: Unlocked) -> DomainError:
    """The paid request was answered but the payment did not settle: ``upstream_failed``
    when the URL answered an error (not a 402), ``upstream_refused`` when it answered a 402
    again (it refused the credential) or a success without settling.  Either way the error
    carries the URL's status and the start of its body."""
    status, host = got.status, job.order.host
    cancelled = "the payment was cancelled and nothing was charged"
    if status >= 400 and status != 402:
        code = "upstream_failed"
        message = f"{host} answered {status} to the paid request and did not settle; {cancelled}."
    else:
        code = "upstream_refused"
        message = (
            f"{host} was sent the payment but did not settle it (it answered {status}); "
            f"{cancelled}."
        )
    return DomainError(code, message, details={"upstream_status": status, **_error_body(got)})


#: How much of a failing answer's body an error carries (the attempt keeps no more).
ERROR_BODY_CHARS = 1024


def _error_body(got: Unlocked) -> dict[str, Any]:
    cut = len(got.body) > ERROR_BODY_CHARS
    return {
        "upstream_body": got.body[:ERROR_BODY_CHARS],
        "upstream_body_encoding": got.encoding,
        "upstream_body_truncated": cut or got.truncated,
    }


def _transport_error(job: Job, exc: outbound.OutboundError, outcome: str) -> DomainError:
    host = job.order.host
    if isinstance(exc, outbound.OutboundRefused):
        return DomainError(
            "url_not_allowed",
            f"pay-url may not request this URL: {exc}; {outcome}.",
            details={"host": host},
        )
    return DomainError(
        "upstream_unavailable", f"{host} did not answer: {exc}; {outcome}.", details={"host": host}
    )


def _broke_off(job: Job, exc: outbound.OutboundFailed) -> DomainError:
    host = job.order.host
    return DomainError(
        "upstream_unavailable",
        f"{host}'s answer broke off midway: {exc}; only what {host} settled is charged.",
        details={"host": host},
    )


def _unconfirmed(job: Job, status: int | None, valid_before: int | None = None) -> DomainError:
    """``valid_before``: when the signed authorization lapses; unused by then, it never
    settles (:mod:`.pending` reads it from the details to release the money)."""
    answered = "did not answer" if status is None else f"answered {status}"
    details: dict[str, Any] = {"upstream_status": status}
    if valid_before is not None:
        details["authorization_valid_before"] = valid_before
    return DomainError(
        "payment_unconfirmed",
        f"{job.order.host} {answered} without confirming the payment. The amount stays "
        "reserved until the payment is reconciled; see GET /spend/attempts.",
        details=details,
    )


async def _fail(
    job: Job, attempt_id: str, error: DomainError, *, payment_failed: bool = False, **values: Any
) -> _Answered:
    """Fail the attempt and read its answer, in one transaction."""

    def record(conn: Connection) -> _Answered:
        now = job.ctx.now()
        row = attempts.fail(conn, attempt_id, error, now, **values)
        if payment_failed:
            settlement.record_payment_failed(conn, row, error, job.request_id, now)
        return _recorded(job, conn, _answer_of(job.ctx, conn, row))

    return await _write(job.ctx, record)


def _recorded(job: Job, conn: Connection, answered: _Answered) -> _Answered:
    """``answered``, stored under the request's key (:attr:`Job.on_answer`) in ``conn``,
    the transaction that ended the attempt."""
    if job.on_answer is not None:
        job.on_answer(conn, answered.row, answered.outcome(job.ctx.box))
    return answered


# --- the database ---------------------------------------------------------------------------


async def _write(ctx: ServerContext, work: Callable[[Connection], T]) -> T:
    """``work`` in one short write transaction in a worker thread (see below)."""
    return await anyio.to_thread.run_sync(in_transaction, ctx, True, work)


def _answered(ctx: ServerContext, conn: Connection, attempt_id: str) -> _Answered:
    return _answer_of(ctx, conn, attempts.get(conn, attempt_id))


def _answer_of(
    ctx: ServerContext, conn: Connection, row: Row[Any], *, body: str | None = None
) -> _Answered:
    """The attempt's answer with the seller's receipt and, paid, a fresh signed token of
    the payer's receipt: the agent's offline proof that it paid."""
    token = None
    if row.status == "succeeded" and row.receipt_id is not None:
        token = receipt_tokens.token_for(ctx, conn, row.receipt_id, ctx.now())
    seller_receipt = attempts.seller_receipt_id(conn, row)
    return _Answered(row, seller_receipt, body=body, receipt_token=token)


async def _read(ctx: ServerContext, read: Callable[[Connection, str], T], attempt_id: str) -> T:
    """``read`` of the attempt, in a read transaction in a worker thread."""

    def run() -> T:
        with ctx.db.read() as conn:
            return read(conn, attempt_id)

    return await anyio.to_thread.run_sync(run)


def encode_json(value: Any) -> bytes:
    """The caller's JSON body for the URL, re-encoded (the API reads numbers as ``Decimal``;
    they go out as JSON numbers: integers exactly, others as the nearest double)."""

    def number(value: Any) -> Any:
        if isinstance(value, Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        raise TypeError(f"{type(value).__name__} is not JSON")

    return json.dumps(value, separators=(",", ":"), default=number).encode()

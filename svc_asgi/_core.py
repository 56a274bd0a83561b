"""The gate's decisions, shared by :class:`~svc_asgi.PaymentGate` and the hosted gates.

:meth:`GateCore.check` answers one question for one request: *may it through to the
resource it needs, and if not, what exactly must the caller do?*  Everything
protocol-neutral lives here (which credential the request presents, verifying it with a
cache and single flight, whether the resource is still sold, what a 402 says, when to
fail closed); the callers only map the outcome onto their transport:

* ``svc_asgi.PaymentGate`` onto any ASGI app (HTTP 402, or an MCP tool error);
* the reference server onto its hosted ``gate_url`` and ``/demo/echo`` routes.

Answers come from a :class:`~svc_asgi.GateBackend` (the service's API for a seller's
app, the database for the hosted gates), so the two cannot drift apart.  The outcome is
an :data:`Outcome`: :class:`Paid`, :class:`Refusal` or :class:`FailedOpen`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

import attrs
from cachetools import LRUCache

from svc import ReceiptVerification, ResourceMetadata, SvcError
from svc.receipts import (
    MalformedReceipt,
    ReceiptTokenError,
    VerifiedReceipt,
    is_receipt_token,
    receipt_id_from_headers,
)

from ._asgi import paid_watched
from ._backend import BackendUnavailable, GateBackend
from ._cache import FlightCache, LruCache
from ._capture import ReceiptCapture
from ._keys import KeySet
from ._offer import Offer
from ._payment import Payment
from ._rails import HoldingRail, PaymentRail, RailRedemption, RailRequest, RailRequestSource

__all__ = [
    "RECEIPT_META_KEY",
    "FailedOpen",
    "GateCore",
    "Held",
    "OnServiceError",
    "Outcome",
    "Paid",
    "Refusal",
]

log = logging.getLogger("svc_asgi")

#: The ``params._meta`` key an MCP ``tools/call`` carries its receipt id under.
RECEIPT_META_KEY = "svc/receipt"
#: Unknown or mismatched receipts are cached this long at most: long enough to absorb a
#: client retrying a bad receipt in a loop, short enough not to matter if one was early.
NEGATIVE_TTL = 5.0
#: How long a 503 asks the caller to wait.
RETRY_AFTER_SECONDS = 5

OnServiceError = Literal["fail_closed", "fail_open"]


@attrs.frozen(kw_only=True)
class Held:
    """An open-rail payment verified and claimed, not settled: the gate serves the
    request, then settles it (:meth:`GateCore.settle`) when the answer's status is below
    400, or releases it (:meth:`GateCore.release`)."""

    rail: HoldingRail
    claim: str
    offer: Offer
    #: What a new challenge is for, should settling fail (``None``: no rail challenge).
    request: RailRequestSource
    source: str


@attrs.frozen(kw_only=True)
class Paid:
    """Let the request through; hand ``payment`` to the app, add ``headers`` to its answer.

    ``held``: the payment is not settled yet; hold the answer back until its status is
    known, then settle or release (see :class:`Held`), and add the settled headers
    instead of ``headers``."""

    payment: Payment
    #: ``X-Svc-Receipt`` (the service receipt id) and any rail's receipt headers.
    headers: tuple[tuple[str, str], ...] = ()
    held: Held | None = None
    #: ``headers`` as ASGI wants them (lowercase latin-1 bytes), encoded once.
    raw_headers: tuple[tuple[bytes, bytes], ...] = attrs.field(init=False)
    #: Their names, for replacing an app's copy.
    raw_names: frozenset[bytes] = attrs.field(init=False)
    #: Those and ``cache-control``: what the paid ``send`` looks for in the app's headers.
    raw_watched: frozenset[bytes] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        raw = tuple((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers)
        object.__setattr__(self, "raw_headers", raw)
        object.__setattr__(self, "raw_names", frozenset(name for name, _ in raw))
        object.__setattr__(self, "raw_watched", paid_watched(self.raw_names))


@attrs.frozen(kw_only=True)
class Refusal:
    """Answer the request with this instead of calling the app.

    ``code`` is the envelope's ``error.code``; ``reason`` says more precisely why, in
    ``error.details.reason``: ``receipt_missing``, ``receipt_malformed``,
    ``receipt_refused`` (402), ``resource_inactive`` (409), ``service_unavailable``
    and ``gate_misconfigured`` (503).
    """

    status: int
    code: str
    message: str
    reason: str
    offer: Offer | None = None
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def payable(self) -> bool:
        """A 402 that paying the offer would turn into a success."""
        return self.status == 402 and self.offer is not None

    def details(self) -> dict[str, Any]:
        details = self.offer.details() if self.offer is not None else {}
        details["reason"] = self.reason
        details.update(self.extra)
        return details

    def body(self, request_id: str) -> dict[str, Any]:
        """The service's error envelope."""
        return {
            "ok": False,
            "error": {"code": self.code, "message": self.message, "details": self.details()},
            "request_id": request_id,
        }

    def render(self, request_id: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """``(status, headers, body)`` of the HTTP answer (content-type and length left to
        the sender).  Never cacheable: a 402 is about this caller at this moment."""
        body = json.dumps(self.body(request_id), separators=(",", ":")).encode()
        headers = [
            (b"cache-control", b"no-store"),
            (b"x-request-id", request_id.encode("latin-1")),
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers),
        ]
        return self.status, headers, body


@attrs.frozen(kw_only=True)
class FailedOpen:
    """The service could not be asked and ``on_service_error="fail_open"``: let the
    request through *without* a payment (the app sees ``payment_of() is None``)."""

    reason: str


Outcome = Paid | Refusal | FailedOpen


def _verification_ttl(verification: ReceiptVerification) -> float:
    return float("inf") if verification.valid else NEGATIVE_TTL


class GateCore:
    """Decides paid / unpaid for one resource per request; see the module docstring.

    ``cache_ttl`` (seconds) bounds how long a confirmed receipt and a resource's price are
    reused without asking the backend again (0 disables caching; single flight stays).
    ``on_service_error`` decides what happens when the backend is unavailable:
    ``fail_closed`` (the default) answers 503, ``fail_open`` lets the request through
    unpaid.  A misconfiguration (a resource that is not the seller's, a bad key) always
    fails closed.  ``rails`` are open-rail strategies (see :class:`PaymentRail`).
    ``max_cache_entries`` bounds each cache (least recently used out first); ``clock``
    (seconds, monotonic) is what the cache lifetimes are measured on.
    """

    def __init__(
        self,
        backend: GateBackend,
        *,
        cache_ttl: float = 60.0,
        on_service_error: OnServiceError = "fail_closed",
        rails: Sequence[PaymentRail] = (),
        max_cache_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if on_service_error not in ("fail_closed", "fail_open"):
            raise ValueError('on_service_error must be "fail_closed" or "fail_open"')
        if cache_ttl < 0:
            raise ValueError("cache_ttl must be >= 0 seconds")
        self.backend = backend
        self.on_service_error: OnServiceError = on_service_error
        self.rails = tuple(rails)
        self._capture = ReceiptCapture(backend)
        self.keys = KeySet(backend)
        # Every resource's last offer, kept past its lifetime: a request bearing a signed
        # receipt token is served from it while the service cannot be asked.
        self._last_offers: LRUCache[str, Offer] = LRUCache(max_cache_entries)
        self._receipts: FlightCache[tuple[str, str | None], ReceiptVerification] = FlightCache(
            ttl=cache_ttl, ttl_for=_verification_ttl, max_entries=max_cache_entries, clock=clock
        )
        self._offers: FlightCache[str, Offer] = FlightCache(
            ttl=cache_ttl, max_entries=max_cache_entries, clock=clock
        )
        # The Paid outcome of a (cached verification, cached offer, source): reused while
        # both cache entries are the very same objects, so a repeat request builds nothing.
        # Both memos are LRU-bounded like the caches, so a full memo drops one cold entry.
        self._paid: LRUCache[tuple[str, str, str], tuple[ReceiptVerification, Offer, Paid]] = (
            LRUCache(max_cache_entries)
        )
        # check_header()'s decided requests: (resource, raw header) -> Paid, until the
        # earlier expiry of the two cached answers it rests on.
        self._decided: LruCache[tuple[str, bytes, bytes], Paid] = LruCache(max_cache_entries, clock)
        #: :meth:`remembered` taking the key ``(resource id, raw name, raw value)`` as one
        #: tuple: the memo's own ``get``, one call less for a gate's every request.
        self.remembered_key: Callable[[tuple[str, bytes, bytes]], Paid | None] = self._decided.get

    # --- the two backend questions, cached ---------------------------------------------------

    async def offer(self, resource_id: str) -> Offer:
        """The resource's offer (cached).  Raises what the backend raises."""
        cached = self._offers.peek(resource_id)
        if cached is not None:  # the hot path: no closure, no await
            return cached

        async def load() -> Offer:
            offer = Offer.from_resource(await self.backend.describe(resource_id))
            self._last_offers[resource_id] = offer
            return offer

        return await self._offers.get(resource_id, load)

    async def verify(self, receipt_id: str, resource_id: str | None) -> ReceiptVerification:
        """The backend's verdict on a receipt (cached, single flight per receipt)."""
        cached = self._receipts.peek((receipt_id, resource_id))
        if cached is not None:
            return cached
        return await self._receipts.get(
            (receipt_id, resource_id), lambda: self.backend.verify(receipt_id, resource_id)
        )

    async def _verify_once(
        self, receipt_id: str, resource_id: str | None, single_use: bool
    ) -> ReceiptVerification:
        """:meth:`verify`; a single-use receipt (metered: captured once) is asked afresh
        every time and never cached."""
        if single_use:
            return await self.backend.verify(receipt_id, resource_id)
        return await self.verify(receipt_id, resource_id)

    def forget(self) -> None:
        """Drop every cached answer (tests; after rotating prices)."""
        self._receipts.clear()
        self._offers.clear()
        self._paid.clear()
        self._decided.clear()

    # --- the decision ------------------------------------------------------------------------

    def remembered(self, resource_id: str, name: bytes, value: bytes) -> Paid | None:
        """The paid decision :meth:`check_header` remembers for this raw receipt header,
        while the answers it rests on are fresh; ``None`` otherwise.  No coroutine, no
        allocation: a gate asks this first for every request presenting a receipt."""
        return self._decided.get((resource_id, name, value))

    async def check_header(
        self,
        resource_id: str,
        name: bytes,
        value: bytes,
        request: RailRequestSource = None,
        *,
        remember: bool = True,
    ) -> Outcome:
        """:meth:`check` for a request whose only credential is one receipt header, given
        raw (``name`` lowercase), as ASGI has it: the hot path of every gate.

        A paid decision is remembered for exactly as long as the cached answers it rests
        on (the offer and the verification), so a repeat request is one dict lookup; the
        outcome is the one :meth:`check` would give.  Refusals are never remembered, nor
        is a payment for a metered offer or (``remember=False``) a route settled after its
        body: those answers are single use, so each one asks again.
        ``request`` is only used (and, given as a callable, only built) for a 402.
        """
        remembered = self.remembered(resource_id, name, value)
        if remembered is not None:
            return remembered
        key = (resource_id, name, value)
        outcome = await self.check(
            resource_id, {name.decode("latin-1"): value.decode("latin-1")}, request=request
        )
        offer = self.cached_offer(resource_id)
        if type(outcome) is Paid and remember and offer is not None and not offer.metered:
            offer_expiry = self._offers.expiry(resource_id)
            receipt_expiry = self._receipts.expiry((outcome.payment.receipt_id, resource_id))
            if offer_expiry is not None and receipt_expiry is not None:
                self._decided.put(key, outcome, min(offer_expiry, receipt_expiry))
        return outcome

    def cached_offer(self, resource_id: str) -> Offer | None:
        """The resource's offer if it is cached (no backend question), else ``None``."""
        return self._offers.peek(resource_id)

    async def check(
        self,
        resource_id: str,
        headers: Mapping[str, str],
        *,
        meta_receipt: object = None,
        accepted: Collection[str] | None = None,
        request: RailRequestSource = None,
    ) -> Outcome:
        """May this request through to ``resource_id``?

        ``headers`` are the request's (names in any case).  ``meta_receipt`` is a receipt
        presented outside the headers (an MCP call's ``params._meta["svc/receipt"]``);
        it wins over the headers when given.  ``accepted`` widens which resources' receipts
        unlock the request (the demo gate accepts either environment's receipt); the
        402 still offers ``resource_id``.  ``request`` (the method and absolute URL, or a
        function building them) lets the rails in: without it, as for an MCP call, no
        rail credential is redeemed and no rail challenge is offered.
        """
        # The cached path stays inline (no coroutine per lookup): it runs on every request.
        offer = self._offers.peek(resource_id)
        if offer is None:
            try:
                offer = await self.offer(resource_id)
            except Exception as exc:
                stale = self._last_offers.get(resource_id)
                if stale is None or not _offline_token(exc, headers, meta_receipt):
                    return self._failed(resource_id, exc)
                offer = stale
        if not offer.active:
            return Refusal(
                status=409,
                code="resource_inactive",
                message=f"Resource {resource_id} is deactivated; it cannot be bought or used.",
                reason="resource_inactive",
                offer=offer,
            )
        wanted = frozenset(accepted) if accepted else None

        if self.rails and request is not None:
            request = _resolved(request)
            redeemed = await self._by_rail(resource_id, offer, headers, wanted, request)
            if redeemed is not None:
                return redeemed
        return await self._by_receipt(resource_id, offer, headers, meta_receipt, wanted, request)

    async def _by_rail(
        self,
        resource_id: str,
        offer: Offer,
        headers: Mapping[str, str],
        wanted: frozenset[str] | None,
        request: RailRequest,
    ) -> Outcome | None:
        """The outcome of the first rail credential among ``headers``, or ``None`` when no
        rail finds one of its own (the request then pays, or not, by receipt)."""
        for rail in self.rails:
            try:
                redemption = await rail.redeem(headers, offer, request)
            except MalformedReceipt as exc:
                message = f"Malformed {rail.name} credential: {exc}."
                return await self._payment_required(offer, "receipt_malformed", message, request)
            except Exception as exc:
                return self._failed(resource_id, exc)
            if redemption is not None:
                return await self._redeemed(offer, rail, redemption, wanted, request)
        return None

    async def _by_receipt(
        self,
        resource_id: str,
        offer: Offer,
        headers: Mapping[str, str],
        meta_receipt: object,
        wanted: frozenset[str] | None,
        request: RailRequestSource,
    ) -> Outcome:
        """The outcome of the svc receipt presented (header or MCP ``_meta``), if any."""
        try:
            receipt_id, source = _presented_receipt(headers, meta_receipt)
        except MalformedReceipt as exc:
            message = f"Malformed receipt: {exc}."
            return await self._payment_required(offer, "receipt_malformed", message, request)
        if receipt_id is None:
            return await self._payment_required(
                offer,
                "receipt_missing",
                "Payment required: pay for this resource, then send the receipt id in "
                "X-Svc-Receipt.",
                request,
            )
        bound = None if wanted else resource_id
        if is_receipt_token(receipt_id):
            decided = await self._by_token(receipt_id, offer, source, bound, wanted, request)
            if not isinstance(decided, str):
                return decided
            receipt_id = decided  # a metered resource's: captured online, once
        verification = self._receipts.peek((receipt_id, bound))
        if verification is None or offer.metered:
            try:
                verification = await self._verify_once(receipt_id, bound, offer.metered)
            except Exception as exc:
                return self._failed(resource_id, exc)
        why = _refused_because(verification, offer, wanted)
        if why is not None:
            return await self._payment_required(
                offer,
                "receipt_refused",
                f"The receipt was refused: {why}.",
                request,
                extra={"receipt_id": verification.receipt_id, "refused_because": why},
            )
        if offer.metered:
            return self._capture_after(verification, offer, source, request)
        key = (verification.receipt_id, offer.resource_id, source)
        memo = self._paid.get(key)
        if memo is not None and memo[0] is verification and memo[1] is offer:
            return memo[2]
        paid = self._paid_outcome(verification, offer, source, ())
        self._paid[key] = (verification, offer, paid)
        return paid

    async def _by_token(
        self,
        token: str,
        offer: Offer,
        source: str,
        bound: str | None,
        wanted: frozenset[str] | None,
        request: RailRequestSource,
    ) -> Outcome | str:
        """A signed receipt token, verified offline: paid or refused; for a metered offer
        (single use, so never decided offline) its receipt id, to ask the service."""
        try:
            signed = await self.keys.verify(token, bound)
        except ReceiptTokenError as exc:
            why = exc.reason
            message = f"The receipt token was refused: {exc.message}"
            return await self._payment_required(
                offer, "receipt_refused", message, request, extra={"refused_because": why}
            )
        except Exception as exc:
            return self._failed(offer.resource_id, exc)
        if offer.metered:
            return signed.receipt_id
        verification = _token_verification(signed, offer)
        if _refused_because(verification, offer, wanted) is not None:
            return await self._payment_required(
                offer,
                "receipt_refused",
                "The receipt token was refused: it paid for another resource.",
                request,
                extra={"receipt_id": signed.receipt_id, "refused_because": "wrong_resource"},
            )
        return self._paid_outcome(verification, offer, source, ())

    def _capture_after(
        self,
        verification: ReceiptVerification,
        offer: Offer,
        source: str,
        request: RailRequestSource,
    ) -> Paid:
        """An authorized metered receipt: served, then captured for the units used
        (:class:`ReceiptCapture`), as an open-rail claim is settled."""
        payment = Payment.from_verification(
            verification, resource_id=offer.resource_id, source=source
        )
        held = Held(
            rail=self._capture,
            claim=verification.receipt_id,
            offer=offer,
            request=request,
            source=source,
        )
        return Paid(payment=payment, held=held)

    async def _redeemed(
        self,
        offer: Offer,
        rail: PaymentRail,
        redemption: RailRedemption,
        wanted: frozenset[str] | None,
        request: RailRequest,
    ) -> Outcome:
        """A rail's answer to a credential: paid (fresh headers each time, nothing to
        reuse), or a 402 naming why, with the rail's own headers when it gave them."""
        source = redemption.source or rail.name
        verification = redemption.verification
        why = _refused_because(verification, offer, wanted)
        if why is None and redemption.claim is not None:
            if not isinstance(rail, HoldingRail):
                return self._misconfigured(
                    offer.resource_id, TypeError(f"{rail.name} claimed but cannot settle")
                )
            payment = Payment.from_verification(
                verification, resource_id=offer.resource_id, source=source
            )
            held = Held(
                rail=rail, claim=redemption.claim, offer=offer, request=request, source=source
            )
            return Paid(payment=payment, held=held)
        if why is None:
            return self._paid_outcome(verification, offer, source, redemption.response_headers)
        extra: dict[str, Any] = {"rail": source, "refused_because": why}
        if verification.receipt_id:
            extra["receipt_id"] = verification.receipt_id
        given = redemption.challenge_headers
        return await self._payment_required(
            offer,
            "receipt_malformed" if redemption.malformed else "receipt_refused",
            f"The {source} credential was refused: {why}.",
            request,
            extra=extra,
            replaced=None if given is None else {id(rail): tuple(given)},
        )

    # --- verify, serve, then settle ----------------------------------------------------------

    async def settle(self, paid: Paid, *, units: int | None = None) -> Paid | Refusal:
        """Settle a held payment whose answer succeeded (``units``: what a metered answer
        used): the paid outcome with its headers, or the 402 (or 503) to answer instead of
        the withheld answer."""
        held = paid.held
        if held is None:
            return paid
        try:
            redemption = await held.rail.settle(held.claim, units=units)
        except BackendUnavailable as exc:
            log.warning("settling %s for %s failed: %s", held.source, held.offer.resource_id, exc)
            return self._unsettled(held.offer.resource_id)
        except Exception as exc:
            log.error("settling %s for %s failed: %r", held.source, held.offer.resource_id, exc)
            return self._unsettled(held.offer.resource_id)
        verification = redemption.verification
        why = _refused_because(verification, held.offer, None)
        if why is None:
            headers = redemption.response_headers
            return self._paid_outcome(verification, held.offer, held.source, headers)
        return await self._payment_required(
            held.offer,
            "receipt_refused",
            f"The {held.source} payment could not be settled, so the answer is withheld and "
            f"nothing was charged: {why}.",
            held.request,
            extra={"rail": held.source, "refused_because": why},
        )

    async def release(self, paid: Paid, *, status: int | None, reason: str) -> None:
        """Release a held payment whose answer failed (``status``), or never came:
        nothing moves.  Failures are logged (the hold expires on the service's side)."""
        held = paid.held
        if held is None:
            return
        try:
            await held.rail.release(held.claim, reason=reason, status=status)
        except Exception as exc:
            log.warning(
                "releasing %s claim for %s failed (it expires on its own): %r",
                held.source,
                held.offer.resource_id,
                exc,
            )

    def _unsettled(self, resource_id: str) -> Refusal:
        # Never fail open here: the answer is withheld until the payment is known.
        return _service_unavailable(
            resource_id,
            "The payment could not be settled now, so the answer is withheld; do not "
            "pay again, retry shortly.",
        )

    @staticmethod
    def _paid_outcome(
        verification: ReceiptVerification,
        offer: Offer,
        source: str,
        headers: Sequence[tuple[str, str]],
    ) -> Paid:
        payment = Payment.from_verification(
            verification, resource_id=offer.resource_id, source=source
        )
        return Paid(payment=payment, headers=(("X-Svc-Receipt", verification.receipt_id), *headers))

    async def _payment_required(
        self,
        offer: Offer,
        reason: str,
        message: str,
        request: RailRequestSource,
        *,
        extra: Mapping[str, Any] | None = None,
        replaced: Mapping[int, tuple[tuple[str, str], ...]] | None = None,
    ) -> Refusal:
        """The 402 for ``offer``, with every rail's challenge headers for ``request``
        (``replaced``: those a rail already gave, by ``id(rail)``).  A rail that fails to
        challenge is logged and left out: the 402 and its JSON body still tell the client
        how to pay."""
        headers: list[tuple[str, str]] = []
        if self.rails and request is not None:
            request = _resolved(request)
            for rail in self.rails:
                given = replaced.get(id(rail)) if replaced else None
                if given is not None:
                    headers.extend(given)
                    continue
                try:
                    headers.extend(await rail.challenge(offer, request))
                except Exception as exc:
                    log.warning(
                        "%s challenge for %s failed; the 402 goes without it: %r",
                        rail.name,
                        offer.resource_id,
                        exc,
                    )
        return Refusal(
            status=402,
            code="payment_required",
            message=message,
            reason=reason,
            offer=offer,
            extra=dict(extra or {}),
            headers=tuple(headers),
        )

    def _failed(self, resource_id: str, exc: Exception) -> Outcome:
        """The outcome of a backend question that raised: an outage, or a misconfiguration."""
        if isinstance(exc, BackendUnavailable):
            return self._unavailable(resource_id, exc)
        return self._misconfigured(resource_id, exc)

    def _unavailable(self, resource_id: str, exc: BaseException) -> Outcome:
        log.warning("payment service unavailable while gating %s: %s", resource_id, exc)
        if self.on_service_error == "fail_open":
            return FailedOpen(reason="service_unavailable")
        return _service_unavailable(
            resource_id,
            "The payment service cannot be reached to check this payment; retry shortly.",
        )

    def _misconfigured(self, resource_id: str, exc: BaseException) -> Refusal:
        # Never open: a wrong key or a resource that is not the seller's is not an outage,
        # and neither is a failure nobody foresaw (a bug must not give the goods away).
        if isinstance(exc, SvcError):  # the service refused the gate's own question
            log.error("gate for %s is misconfigured: %r", resource_id, exc)
        else:  # not a configuration to fix: say so, with the traceback to find it by
            log.error(
                "gate for %s failed unexpectedly and refuses (503) until it works: %r",
                resource_id,
                exc,
                exc_info=exc,
            )
        return Refusal(
            status=503,
            code="gate_misconfigured",
            message="This gate cannot check payments; its operator has been told.",
            reason="gate_misconfigured",
            extra={"resource_id": resource_id},
        )


def _service_unavailable(resource_id: str, message: str) -> Refusal:
    """A 503 asking the caller to retry after :data:`RETRY_AFTER_SECONDS`."""
    return Refusal(
        status=503,
        code="payment_service_unavailable",
        message=message,
        reason="service_unavailable",
        extra={"resource_id": resource_id},
        headers=(("Retry-After", str(RETRY_AFTER_SECONDS)),),
    )


def _resolved(request: RailRequest | Callable[[], RailRequest]) -> RailRequest:
    return request if isinstance(request, RailRequest) else request()


def _refused_because(
    verification: ReceiptVerification, offer: Offer, wanted: frozenset[str] | None
) -> str | None:
    """Why this verification does not pay for ``offer`` (``None``: it does)."""
    if not verification.valid:
        return verification.reason or "unknown receipt"
    if (
        verification.resource_id != offer.resource_id
        if wanted is None
        else verification.resource_id not in wanted
    ):
        return "receipt is for another resource"
    return None


def _token_verification(signed: VerifiedReceipt, offer: Offer) -> ReceiptVerification:
    """A verified token as the gate reads a verification (what it buys: the offer's)."""
    return ReceiptVerification(
        valid=True,
        receipt_id=signed.receipt_id,
        resource_id=signed.resource_id,
        amount=signed.amount,
        rail=signed.rail,
        environment=signed.environment,
        metadata=ResourceMetadata(
            sku_kind=offer.sku_kind, credits=offer.credits, credit_unit=offer.credit_unit
        ),
    )


def _offline_token(exc: Exception, headers: Mapping[str, str], meta_receipt: object) -> bool:
    """The service is out of reach and the request bears a receipt token: it is decided
    offline, on the resource's last known offer."""
    if not isinstance(exc, BackendUnavailable):
        return False
    try:
        presented, _ = _presented_receipt(headers, meta_receipt)
    except MalformedReceipt:
        return False
    return presented is not None and is_receipt_token(presented)


def _presented_receipt(headers: Mapping[str, str], meta_receipt: object) -> tuple[str | None, str]:
    """``(receipt id or None, source)``; raises :class:`MalformedReceipt`."""
    if meta_receipt is not None:
        if not isinstance(meta_receipt, str):
            raise MalformedReceipt(f'_meta["{RECEIPT_META_KEY}"] must be a string receipt id')
        try:
            return receipt_id_from_headers({"x-svc-receipt": meta_receipt}), "mcp_meta"
        except MalformedReceipt:
            raise MalformedReceipt(
                f'_meta["{RECEIPT_META_KEY}"] is not a receipt id (rcpt_…)'
            ) from None
    return receipt_id_from_headers(headers), "header"

"""The seam for open payment rails (x402, MPP): :class:`PaymentRail` and :class:`RailRequest`.

A gate is unlocked by a service receipt (``X-Svc-Receipt``, ``Payment-Receipt``,
``PAYMENT-RESPONSE``), or paid *at the gate itself* on an open rail, both answering the
same 402:

* **x402**: the 402 carries a ``PAYMENT-REQUIRED`` challenge; the client retries with a
  signed ``PAYMENT-SIGNATURE`` and the paid response carries ``PAYMENT-RESPONSE``;
* **MPP**: the 402 carries ``WWW-Authenticate: Payment …``; the client retries with
  ``Authorization: Payment …`` and the paid response carries ``Payment-Receipt``.

A rail is one object plugged into the gate core (``GateCore(rails=[...])`` /
``PaymentGate(rails=[...])``) that does both halves for its protocols:

1. :meth:`PaymentRail.challenge` gives its headers for a 402, next to the JSON body that
   points at ``gate_url`` / ``pay_url`` for the service's own rail;
2. :meth:`PaymentRail.redeem` is asked, before any receipt header is looked at, whether
   the request carries a credential of its protocol; if so it verifies it and returns a
   :class:`RailRedemption`;
3. "verify, serve, then settle": a rail that can (:class:`HoldingRail`, as
   :class:`ServiceRails` does) only *claims* the credential in ``redeem`` (verified, its
   nonce held so that a concurrent replay fails, nothing moved) and returns the
   redemption with a ``claim``; the gate serves the request with the answer held back,
   then calls :meth:`HoldingRail.settle` when the answer's status is below 400 (after
   its whole body for a metered or ``after_body`` route, with the units it used), and
   :meth:`HoldingRail.release` otherwise (nothing is charged for a failed answer).

Both hooks see the :class:`RailRequest` (method and absolute URL), because both
protocols bind a challenge to it: MPP's challenge id is an HMAC over a request that
names the method, path and query, and x402's requirements name the resource URL.  The
challenge and the redemption of one payment must therefore see the same URL, and a
challenge is never reused: each carries a fresh nonce.

Nothing here knows x402 or MPP; the core only calls the hooks.  :class:`ServiceRails`
(in ``_service_rails``) is the rail a seller's app uses: it asks the service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

from svc import GateRedemption, ReceiptVerification

from ._offer import Offer

__all__ = ["HoldingRail", "PaymentRail", "RailRedemption", "RailRequest", "RailRequestSource"]


@attrs.frozen
class RailRequest:
    """The request a challenge is for, as the client addressed it."""

    #: Upper-case HTTP method.
    method: str
    #: Absolute URL, query included (``https://shop.example/v1/report?q=1``).
    url: str


#: What the gate core is given: the request, or a way to build it when a rail needs it
#: (most requests are decided from a cached receipt and never need one).
RailRequestSource = RailRequest | Callable[[], RailRequest] | None


@attrs.frozen(kw_only=True)
class RailRedemption:
    """What a rail made of a credential: a receipt, or a refusal.

    Accepted: ``verification`` is the service's (valid, for the offered resource) and
    ``response_headers`` go on the paid response.  Refused: ``verification.valid`` is
    false and its ``reason`` says why (the 402's ``refused_because``).
    """

    #: Must be ``valid`` and for the offered resource, or the gate refuses the request.
    verification: ReceiptVerification
    #: E.g. ``[("PAYMENT-RESPONSE", "...")]``; added to the app's response.
    response_headers: Sequence[tuple[str, str]] = ()
    #: The protocol that paid, for a rail that speaks several (``x402``, ``mpp``); it
    #: becomes :attr:`Payment.source`.  ``None``: the rail's ``name``.
    source: str | None = None
    #: A refused credential: this rail's headers for the 402, instead of asking
    #: :meth:`PaymentRail.challenge` again (a fresh challenge, or none after a replay,
    #: so that an auto-paying client is not invited to pay twice).  ``None``: ask.
    challenge_headers: Sequence[tuple[str, str]] | None = None
    #: A refused credential that could not even be read: 402 ``receipt_malformed``.
    malformed: bool = False
    #: Verified and claimed, not settled: the hold :meth:`HoldingRail.settle` or
    #: :meth:`HoldingRail.release` takes; ``verification`` is then provisional (the
    #: receipt the payment settles into).
    claim: str | None = None

    @classmethod
    def from_answer(cls, answer: GateRedemption) -> RailRedemption:
        """The service's answer to a credential (``POST /gates/redeem``, ``POST
        /gates/settle``) as a redemption."""
        if answer.claim is not None and answer.verification is not None:
            return cls(verification=answer.verification, source=answer.rail, claim=answer.claim)
        if answer.paid and answer.verification is not None:
            return cls(
                verification=answer.verification,
                response_headers=answer.headers,
                source=answer.rail,
            )
        refused = ReceiptVerification(
            valid=False, receipt_id="", reason=answer.message or "the credential was refused"
        )
        return cls(
            verification=refused,
            source=answer.rail,
            challenge_headers=answer.headers,
            malformed=answer.reason == "receipt_malformed",
        )


@runtime_checkable
class PaymentRail(Protocol):
    """One or more open payment protocols spoken by the gate (see the module docstring)."""

    #: Short name; becomes :attr:`Payment.source` unless a redemption names its protocol.
    name: str

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        """Headers this rail adds to a 402 for ``offer`` at ``request`` (may be empty).

        Raising is allowed and never breaks the 402: the gate logs it and answers
        without this rail's headers.
        """
        ...

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        """``None`` when the request carries no credential of this rail.

        Otherwise verify and settle the credential and return the redemption (a refused
        one included).  Raise :class:`svc.receipts.MalformedReceipt` for a credential that
        cannot be read (a 402 naming the reason), and :class:`~svc_asgi.BackendUnavailable`
        when settlement cannot be done now (the gate's ``on_service_error`` applies).
        """
        ...


@runtime_checkable
class HoldingRail(PaymentRail, Protocol):
    """A rail that settles after the answer: its :meth:`redeem` may return a redemption
    with a ``claim``, which the gate settles or releases once the answer's status is
    known."""

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        """Settle the claimed payment (the answer succeeded): a valid verification and the
        paid answer's headers, or a refused one (nothing moved; the gate withholds the
        answer and answers 402).  ``units``: what a metered answer used (``None`` for a
        fixed price); the service charges them, at most the offer's ``max_amount``.
        Raise :class:`~svc_asgi.BackendUnavailable` when the outcome cannot be known now."""
        ...

    async def release(self, claim: str, *, reason: str, status: int | None) -> None:
        """Release the claimed payment (the answer failed, ``status``): nothing moves."""
        ...

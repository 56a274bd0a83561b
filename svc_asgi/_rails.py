"""The seam for open payment rails (x402, MPP): :class:`PaymentRail`.

Today a gate is unlocked by a service receipt (``X-Svc-Receipt``, ``Payment-Receipt``,
``PAYMENT-RESPONSE``).  The open-rails work adds two more ways to pay *at the gate
itself*, both answering the same 402:

* **x402**: the 402 carries a ``PAYMENT-REQUIRED`` challenge; the client retries with a
  signed ``PAYMENT-SIGNATURE`` and the paid response carries ``PAYMENT-RESPONSE``;
* **MPP**: the 402 carries ``WWW-Authenticate: Payment …``; the client retries with
  ``Authorization: Payment …`` and the paid response carries ``Payment-Receipt``.

A rail is one object plugged into the gate core (``GateCore(rails=[...])`` /
``PaymentGate(rails=[...])``) that does both halves for its protocol:

1. :meth:`PaymentRail.challenge` adds its headers to every 402 the gate sends, next to
   the JSON body that points at ``gate_url`` / ``pay_url`` for the service's own rail;
2. :meth:`PaymentRail.redeem` is asked, before any receipt header is looked at, whether
   the request carries a credential of its protocol; if so it verifies and settles it
   and returns a :class:`RailRedemption`: the service's verification of the resulting
   receipt, plus headers for the paid response.

Nothing here knows x402 or MPP; the core only calls the hooks.  No rail ships in this
package yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from svc import ReceiptVerification

if TYPE_CHECKING:
    from ._core import Offer

__all__ = ["PaymentRail", "RailRedemption"]


@attrs.frozen(kw_only=True)
class RailRedemption:
    """A credential a rail accepted: the receipt it became and the paid response's headers."""

    #: Must be ``valid`` and for the offered resource, or the gate refuses the request.
    verification: ReceiptVerification
    #: E.g. ``[("PAYMENT-RESPONSE", "...")]``; added to the app's response.
    response_headers: Sequence[tuple[str, str]] = ()


@runtime_checkable
class PaymentRail(Protocol):
    """One open payment protocol spoken by the gate (see the module docstring)."""

    #: Short name (``"x402"``, ``"mpp"``); becomes :attr:`Payment.source`.
    name: str

    def challenge(self, offer: Offer) -> Sequence[tuple[str, str]]:
        """Headers this rail adds to a 402 for ``offer`` (may be empty)."""
        ...

    async def redeem(self, headers: Mapping[str, str], offer: Offer) -> RailRedemption | None:
        """``None`` when the request carries no credential of this rail.

        Otherwise verify and settle the credential and return the redemption.  Raise
        :class:`svc.receipts.MalformedReceipt` for a credential of this rail that cannot
        be read (a 402 naming the reason), and :class:`~svc_asgi.BackendUnavailable` when
        settlement cannot be done now (the gate's ``on_service_error`` then applies).
        """
        ...

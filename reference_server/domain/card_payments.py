"""Card payments on a resource's buy page (``/buy/{short_id}``), through the sandbox card
processor in ``test``.

:func:`check_card` reads what a person typed (number, expiry, CVC) and says, field by
field, what is wrong; :func:`sandbox_outcome` is the sandbox processor's answer to a card
that reads well: ``4242 4242 4242 4242`` pays, ``4000 0000 0000 0002`` is declined, any
other number is not one of its test cards.  :func:`book_card_sale` books an approved card
payment like every other sale (:func:`~reference_server.domain.payments.book_sale`): the
price from the processor's clearing account to the seller's balance, the platform fee to
the platform, a receipt (rail ``card``, settlement ``processor_deposit``) and
``payment.succeeded`` for the seller's owner.  In ``live`` the card is taken by the
configured processor's Checkout (:mod:`reference_server.processor.checkout`), which books
through :func:`book_card_sale` too; without one the page says so and takes no card.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

import attrs
from sqlalchemy import Connection, Row, select

from ..ids import new_id
from ..store import tables as t
from . import ledger
from .errors import DomainError
from .payments import book_sale
from .resources import fixed_price_micros

__all__ = [
    "CARD_RAIL",
    "DECLINED_CARD",
    "PAYING_CARD",
    "PROCESSOR_DEPOSIT",
    "Card",
    "book_card_sale",
    "check_card",
    "sandbox_outcome",
]

#: The rail a buy-page payment is recorded with (receipts, ``payment.succeeded``).
CARD_RAIL = "card"
PROCESSOR_DEPOSIT = "processor_deposit"
#: The sandbox processor's test cards.
PAYING_CARD = "4242424242424242"
DECLINED_CARD = "4000000000000002"

_EXPIRY = re.compile(r"^(\d{1,2})\s*/\s*(\d{2}|\d{4})$")


@attrs.frozen
class Card:
    """A card as typed, read well: digits only, expiry month and four-digit year."""

    number: str
    exp_month: int
    exp_year: int


def check_card(
    number: str, expiry: str, cvc: str, *, now: datetime
) -> tuple[Card | None, dict[str, str]]:
    """The card, or for each field (``number``, ``expiry``, ``cvc``) what is wrong."""
    digits = re.sub(r"[\s-]", "", number)
    month_year, expiry_problem = _read_expiry(expiry.strip(), now)
    problems = {
        "number": _number_problem(digits),
        "expiry": expiry_problem,
        "cvc": None
        if re.fullmatch(r"\d{3,4}", cvc.strip())
        else "Enter the 3 or 4 digit security code (CVC) printed on the card.",
    }
    errors = {field: message for field, message in problems.items() if message is not None}
    if errors or month_year is None:
        return None, errors
    return Card(number=digits, exp_month=month_year[0], exp_year=month_year[1]), {}


def _number_problem(digits: str) -> str | None:
    if not digits:
        return "Enter the card number."
    # ASCII digits only: ``"²".isdigit()`` is true, and ``int("²")`` fails.
    if not (digits.isascii() and digits.isdigit()) or not 12 <= len(digits) <= 19:
        return (
            "The card number should be 12 to 19 digits (spaces are fine), like 4242 4242 4242 4242."
        )
    if not _luhn(digits):
        return "This card number is not valid: check it for a typo."
    return None


def _read_expiry(expiry: str, now: datetime) -> tuple[tuple[int, int] | None, str | None]:
    """``(month, four-digit year)``, or what is wrong with the expiry date."""
    if not expiry:
        return None, "Enter the expiry date as MM/YY, like 12/34."
    found = _EXPIRY.fullmatch(expiry)
    if found is None:
        return None, "Write the expiry date as MM/YY (month, then year), like 12/34."
    month, year = int(found.group(1)), int(found.group(2))
    year += 2000 if year < 100 else 0
    if not 1 <= month <= 12:
        return None, "The expiry month should be 01 to 12, like 12/34."
    if (year, month) < (now.year, now.month):
        return None, (
            f"This card expired at the end of {month:02d}/{year % 100:02d}: "
            "use a card that has not expired."
        )
    if year > now.year + 50:
        return None, "The expiry year is too far in the future: check it."
    return (month, year), None


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def sandbox_outcome(card: Card) -> Literal["approved", "declined", "unknown"]:
    """What the sandbox card processor answers for a card that reads well."""
    if card.number == PAYING_CARD:
        return "approved"
    if card.number == DECLINED_CARD:
        return "declined"
    return "unknown"


def book_card_sale(
    conn: Connection,
    *,
    resource: Row[Any],
    fee_bps: int,
    request_id: str,
    now: datetime,
    amount: int | None = None,
    payment_intent_id: str | None = None,
) -> str:
    """An approved card payment for ``resource``, booked: returns the receipt id.

    The money comes from the processor's clearing account of the resource's environment
    (a source account: it goes negative by what the processor will deposit).  ``amount``
    is what the processor charged (default: the resource's fixed price now, which a
    metered resource without a fallback price has not: ``resource_metered``) and
    ``payment_intent_id`` its PaymentIntent (the sandbox makes one up).
    """
    if amount is None:
        amount = fixed_price_micros(resource)
    if amount is None:
        raise DomainError(
            "resource_metered",
            f"Resource {resource.id} is priced by use and has no fixed fallback price: it "
            "cannot be bought by card; pay it from a wallet key (POST /pay) or at its gate.",
        )
    env = resource.environment
    seller = conn.execute(select(t.sellers).where(t.sellers.c.id == resource.seller_id)).one()
    clearing = ledger.ensure_account(
        conn, environment=env, kind=ledger.PROCESSOR_CLEARING, ref_id=ledger.PLATFORM, now=now
    )
    return book_sale(
        conn,
        resource=resource,
        seller=seller,
        rail=CARD_RAIL,
        settlement=PROCESSOR_DEPOSIT,
        amount=amount,
        debit=clearing,
        fee_bps=fee_bps,
        request_id=request_id,
        now=now,
        event_extra={"processor_payment_intent_id": payment_intent_id or new_id("pi")},
    )

"""The sandbox card processor's reading of a typed card, without a server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reference_server.domain.card_payments import Card, check_card, sandbox_outcome

NOW = datetime(2026, 11, 24, tzinfo=UTC)


@pytest.mark.parametrize(
    ("number", "expiry", "card"),
    [
        ("4242 4242 4242 4242", "12/39", Card("4242424242424242", 12, 2039)),
        ("4242-4242-4242-4242", "1/2030", Card("4242424242424242", 1, 2030)),
        ("4000000000000002", " 11 / 26 ", Card("4000000000000002", 11, 2026)),  # this month
    ],
)
def test_cards_that_read_well(number: str, expiry: str, card: Card) -> None:
    assert check_card(number, expiry, "123", now=NOW) == (card, {})


@pytest.mark.parametrize(
    ("number", "expiry", "cvc", "field", "message"),
    [
        ("", "12/39", "123", "number", "Enter the card number."),
        ("4242 4242", "12/39", "123", "number", "12 to 19 digits"),
        ("4242 4242 4242 424x", "12/39", "123", "number", "12 to 19 digits"),
        ("4242 4242 4242 4243", "12/39", "123", "number", "check it for a typo"),
        ("4242424242424242", "", "123", "expiry", "Enter the expiry date as MM/YY"),
        ("4242424242424242", "2039-12", "123", "expiry", "Write the expiry date as MM/YY"),
        ("4242424242424242", "00/39", "123", "expiry", "month should be 01 to 12"),
        ("4242424242424242", "10/26", "123", "expiry", "expired at the end of 10/26"),
        ("4242424242424242", "12/2099", "123", "expiry", "too far in the future"),
        ("4242424242424242", "12/39", "", "cvc", "3 or 4 digit security code"),
        ("4242424242424242", "12/39", "12345", "cvc", "3 or 4 digit security code"),
    ],
)
def test_each_problem_is_said_for_its_field(
    number: str, expiry: str, cvc: str, field: str, message: str
) -> None:
    card, errors = check_card(number, expiry, cvc, now=NOW)
    assert card is None and list(errors) == [field]
    assert message in errors[field]


def test_every_problem_at_once() -> None:
    assert set(check_card("1", "x", "", now=NOW)[1]) == {"number", "expiry", "cvc"}


def test_the_sandbox_outcomes() -> None:
    assert sandbox_outcome(Card("4242424242424242", 12, 2039)) == "approved"
    assert sandbox_outcome(Card("4000000000000002", 12, 2039)) == "declined"
    assert sandbox_outcome(Card("5555555555554444", 12, 2039)) == "unknown"

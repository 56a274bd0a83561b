"""``svc.money``: money as the service writes it, USD decimal strings with at most six
places.  Public: the reference server and the gate use these same functions.

The wire format is a decimal string (``"0.05"``); in Python it is a :class:`~decimal.Decimal`;
the reference server stores integer micro-units.  Floats never appear: ``0.1 + 0.2`` is not
a price.

One grammar, here, for the server reading requests and the SDK checking what it sends and
reading what it gets back, so the two can never disagree about what an amount is::

    amount = ( "0" | [1-9][0-9]{0,11} ) [ "." [0-9]{1,6} ]

ASCII digits only (``str.isdigit`` and :class:`~decimal.Decimal` also take Arabic-Indic or
fullwidth digits), no sign, no leading zeros, no spaces or newlines anywhere, no exponent,
at most six decimal places (USDC precision), less than a trillion so that micro-units fit a
signed 64-bit integer.  A string outside it is refused, never trimmed or rounded into it.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = [
    "AMOUNT_PATTERN",
    "GRAMMAR_HINT",
    "MAX_AMOUNT",
    "MAX_UNITS",
    "MICROS",
    "AmountError",
    "format_amount",
    "format_micros",
    "from_micros",
    "metered_amount",
    "parse_amount",
    "to_micros",
]

MICROS = 1_000_000
_QUANTUM = Decimal("0.000001")
_INTEGER_DIGITS = 12
_LIMIT = Decimal(10) ** _INTEGER_DIGITS
#: ``re`` with ``[0-9]`` (not ``\d``) and ``fullmatch`` (``$`` would allow a final newline).
_GRAMMAR = re.compile(rf"(?:0|[1-9][0-9]{{0,{_INTEGER_DIGITS - 1}}})(?:\.[0-9]{{1,6}})?")
#: The most one amount may be, in dollars (a price, a payment, a funding): the service
#: refuses more in a request, and pay-url will not sign for more.
MAX_AMOUNT = Decimal("1000000")
#: The grammar as a regular expression (unanchored), for JSON Schema's ``pattern``.
AMOUNT_PATTERN = _GRAMMAR.pattern
GRAMMAR_HINT = (
    'a decimal string like "0.05" or "12.50": ASCII digits, at most 12 before the point, '
    "at most 6 decimal places, no sign, spaces, exponent or leading zeros"
)


class AmountError(ValueError):
    """An amount outside the grammar; ``reason`` reads after the field's name."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name} {reason}")
        self.name = name
        self.reason = reason


def parse_amount(value: object, *, name: str = "amount") -> Decimal:
    """Read an amount into a Decimal: a wire string in the grammar above, or (from Python
    callers of the SDK) an ``int`` of whole dollars or a ``Decimal``, held to the same range.

    Raises :class:`AmountError` (a :class:`ValueError`) for anything else: floats, booleans,
    negative, non-finite or out-of-range numbers, more than six decimal places, and every
    string the grammar refuses, so a bad amount is refused instead of rounded.
    """
    if isinstance(value, str):
        if not _GRAMMAR.fullmatch(value):
            raise AmountError(name, f"must be {GRAMMAR_HINT}; got {value[:40]!r}")
        return Decimal(value)
    if isinstance(value, bool | float):
        kind = type(value).__name__
        raise AmountError(name, f'must be a decimal string like "0.05", not a {kind} ({value!r})')
    if not isinstance(value, Decimal | int):
        kind = type(value).__name__
        raise AmountError(name, f'must be a decimal string such as "0.05", not {kind}')
    amount = Decimal(value)
    if not amount.is_finite():
        raise AmountError(name, "must be a finite number")
    if amount.is_signed():
        raise AmountError(name, f"must not be negative, got {amount}")
    if amount >= _LIMIT:
        raise AmountError(name, f"must be less than {_LIMIT:f}")
    if amount != amount.quantize(_QUANTUM, rounding="ROUND_DOWN"):
        raise AmountError(name, "has more than 6 decimal places")
    return amount


def to_micros(amount: Decimal) -> int:
    """Exact conversion of a parsed amount into integer micro-units."""
    return int(amount * MICROS)


def from_micros(micros: int) -> Decimal:
    return (Decimal(micros) / MICROS).quantize(_QUANTUM)


def format_amount(amount: Decimal) -> str:
    """Canonical wire form of a Decimal: at least two decimals, no trailing zeros beyond them.

    ``format_amount(Decimal("1"))`` is ``"1.00"``; ``Decimal("0.050000")`` is ``"0.05"``.
    Only a :class:`~decimal.Decimal`: an ``int`` is refused with :class:`TypeError`, since
    ``parse_amount(5)`` reads whole dollars while the server stores micro-units, and a bare
    ``5`` here could mean either.  Integer micro-units go through :func:`format_micros`.
    """
    if not isinstance(amount, Decimal):
        kind = type(amount).__name__
        raise TypeError(
            f"format_amount takes a Decimal, not {kind}: use format_micros() for micro-units"
        )
    whole, _, frac = f"{amount.quantize(_QUANTUM):f}".partition(".")
    return f"{whole}.{frac.rstrip('0').ljust(2, '0')}"


def format_micros(micros: int) -> str:
    """Canonical wire form of integer micro-units: ``format_micros(50_000)`` is ``"0.05"``."""
    if isinstance(micros, bool) or not isinstance(micros, int):
        kind = type(micros).__name__
        raise TypeError(f"format_micros takes integer micro-units, not {kind}")
    return format_amount(from_micros(micros))


#: The most units one metered payment reports: far past any answer, and small enough that
#: units * a unit price in micros stays exact.
MAX_UNITS = 10**12


def metered_amount(units: int, unit_price: Decimal, max_amount: Decimal) -> Decimal:
    """What a metered payment settles: ``units`` * ``unit_price``, never above
    ``max_amount`` (what the payer authorised), rounded down to a micro-dollar so that
    the payer is never charged a fraction more than used."""
    if isinstance(units, bool) or not isinstance(units, int) or not 0 <= units <= MAX_UNITS:
        raise ValueError(f"units must be a whole number from 0 to {MAX_UNITS}, got {units!r}")
    used = (unit_price * units).quantize(_QUANTUM, rounding="ROUND_DOWN")
    return min(used, max_amount)

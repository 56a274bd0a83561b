"""Money as the service writes it: USD decimal strings with at most six places.

The wire format is a decimal string (``"0.05"``); in Python it is a :class:`~decimal.Decimal`;
the reference server stores integer micro-units.  Floats never appear: ``0.1 + 0.2`` is not
a price.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["MICROS", "format_amount", "from_micros", "parse_amount", "to_micros"]

MICROS = 1_000_000
_QUANTUM = Decimal("0.000001")
#: Digits with an optional fraction: no exponents, no spaces inside, at most 18 digits
#: before the point (far beyond any price, and safely inside a 64-bit micro-unit count).
_LIMIT = Decimal(10) ** 18
_PLAIN_DECIMAL = re.compile(r"-?[0-9]{1,18}(\.[0-9]+)?")


def parse_amount(value: object) -> Decimal:
    """Read a wire amount (decimal string, int or Decimal) into a Decimal.

    Raises :class:`ValueError` for floats, booleans, non-numbers, NaN/infinity and more
    than six decimal places, so that a bad amount is refused instead of rounded.
    """
    if isinstance(value, bool | float):
        raise ValueError('amount must be a decimal string such as "0.05", not a float')
    if isinstance(value, Decimal):
        amount = value
    elif isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, str):
        if not _PLAIN_DECIMAL.fullmatch(value.strip()):
            raise ValueError(f'amount {value[:40]!r} is not a plain decimal number like "0.05"')
        amount = Decimal(value.strip())
    else:
        raise ValueError('amount must be a decimal string such as "0.05"')
    if not amount.is_finite():
        raise ValueError("amount must be a finite number")
    if abs(amount) >= _LIMIT:
        raise ValueError("amount is out of range")
    if amount != amount.quantize(_QUANTUM, rounding="ROUND_DOWN"):
        raise ValueError("amount has more than 6 decimal places")
    return amount


def to_micros(amount: Decimal) -> int:
    """Exact conversion of a parsed amount into integer micro-units."""
    return int(amount * MICROS)


def from_micros(micros: int) -> Decimal:
    return (Decimal(micros) / MICROS).quantize(_QUANTUM)


def format_amount(amount: Decimal | int) -> str:
    """Canonical wire form: at least two decimals, no trailing zeros beyond them.

    ``format_amount(Decimal("1"))`` is ``"1.00"``; ``Decimal("0.050000")`` is ``"0.05"``;
    an ``int`` is taken as micro-units.
    """
    if isinstance(amount, int):
        amount = from_micros(amount)
    text = f"{amount.quantize(_QUANTUM):f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    if len(frac) < 2:
        frac = frac.ljust(2, "0")
    return f"{whole}.{frac}"

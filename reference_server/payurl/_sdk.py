"""Importing the official x402 and pympp SDKs without their process-wide side effect.

Both pull in eth-account, whose import (through py_ecc) raises the interpreter's recursion
limit to 100 000 for the whole process.  At that limit a deeply nested JSON body overflows
the C stack instead of raising ``RecursionError`` (see
``reference_server.sandbox.eip3009._eth_account``).  They are also only installed with the
``rails`` extra.  So every import of them in this package is written inside
:func:`sdk_imports`, at the point of use, and the limit is put back afterwards.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["sdk_imports"]


@contextmanager
def sdk_imports() -> Iterator[None]:
    """Import inside this block; the recursion limit is what it was before it."""
    limit = sys.getrecursionlimit()
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)

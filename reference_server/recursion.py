"""Importing eth-account without its process-wide side effect: :func:`keeping_recursion_limit`.

eth-account (imported by the sandbox's EIP-3009 signer, the x402 and pympp SDKs, and web3)
imports py_ecc, whose import raises the interpreter's recursion limit to 100 000 for the
whole process.  At that limit a deeply nested JSON body, which ``json`` refuses with
``RecursionError`` at the default limit (the API answers 400), overflows the C stack
instead and kills the server.  Nothing in the service recurses deeply, so every import
that may reach eth-account is written inside this block, at its point of use (they are
also optional extras), and the limit is put back afterwards.  The one place for the rule.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["keeping_recursion_limit"]

#: The module whose import raises the limit.
_SIDE_EFFECT_SOURCE = "py_ecc"


@contextmanager
def keeping_recursion_limit() -> Iterator[None]:
    """Import inside this block; the recursion limit afterwards is what it was before.

    Once py_ecc is imported its side effect is spent, and the block does nothing: putting
    back a limit read on entry would race with any thread that changed the limit
    meanwhile (a test framework raising it for a while, say) and could leave that change
    in place for good."""
    if _SIDE_EFFECT_SOURCE in sys.modules:
        yield
        return
    limit = sys.getrecursionlimit()
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)

"""What the code has already made sure of, checked in a way ``python -O`` keeps.

``assert`` vanishes under ``python -O``, and with it the check: a handler would run on with
a ``None`` it was promised never to see.  :class:`InvariantError` is raised instead (an
internal error: the request is answered 500 ``internal_error`` and logged as a bug, never
blamed on the client).  ``tests/test_no_assert.py`` keeps ``assert`` out of library code.
"""

from __future__ import annotations

__all__ = ["InvariantError"]


class InvariantError(RuntimeError):
    """A condition the code guarantees did not hold: a bug in the service, not bad input."""

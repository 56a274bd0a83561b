"""Small types shared across the SDK."""

from __future__ import annotations

from typing import Final, Literal, final

__all__ = ["NOT_GIVEN", "NotGiven"]


@final
class NotGiven:
    """The default of an argument where ``None`` has a meaning of its own.

    ``client.wallet_keys.update(key_id, max_per_tx=None)`` clears the limit (``null`` is
    sent), while leaving ``max_per_tx`` out keeps it as it is: the default is
    :data:`NOT_GIVEN`, which is never sent.  It is falsy, and copies and pickles of it are
    the same object.
    """

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __reduce__(self) -> str:
        return "NOT_GIVEN"  # pickle and copy resolve the module global: one instance


#: "Argument left out": see :class:`NotGiven`.
NOT_GIVEN: Final = NotGiven()

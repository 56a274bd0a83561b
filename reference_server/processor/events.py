"""What a processor event is to the code that applies it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection

from ..settings import Settings

__all__ = ["Handler", "ProcessorEvent"]


@attrs.frozen(kw_only=True)
class ProcessorEvent:
    """A verified event: its id, type, the connected account it concerns (Connect events)
    and the object it carries (``data.object``, as the processor sent it)."""

    id: str
    type: str
    account: str | None
    livemode: bool
    created_at: datetime
    object: Mapping[str, Any]


#: Applies one event inside the transaction that records it; raising rolls both back (the
#: processor then redelivers it).
Handler = Callable[[Connection, ProcessorEvent, Settings, datetime], None]

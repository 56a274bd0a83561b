"""The processor's word on the card refunds we asked it for (:mod:`..domain.refunds_card`).

``refund.created`` / ``refund.updated`` / ``refund.failed`` carry the refund; a
``charge.refunded`` carries the charge, with its refunds when the processor includes
them.  A refund of ours still ``pending`` is booked when it ``succeeded`` (and
``payment.refunded`` recorded) or, ``failed`` / ``canceled``, its money put back; one
decided already, or not ours, changes nothing (a redelivery is harmless).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from ..domain import refunds, refunds_card
from ..settings import Settings
from . import checkout
from .events import Handler, ProcessorEvent

__all__ = ["HANDLERS"]


def _apply(conn: Connection, refund: Any, now: datetime) -> None:
    if not isinstance(refund, Mapping) or not isinstance(refund.get("id"), str):
        return
    status = refunds_card.stripe_status(refund.get("status"))
    metadata = refund.get("metadata")
    ours = metadata.get("svc_refund_id") if isinstance(metadata, Mapping) else None
    if status is not None:
        refunds.confirm_card_refund(
            conn, refund["id"], status, now, refund_id=ours if isinstance(ours, str) else None
        )


def _refund(conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime) -> None:
    _apply(conn, event.object, now)


def _charge_refunded(
    conn: Connection, event: ProcessorEvent, settings: Settings, now: datetime
) -> None:
    checkout.HANDLERS["charge.refunded"](conn, event, settings, now)  # dated on its checkout
    listed = event.object.get("refunds")
    data = listed.get("data") if isinstance(listed, Mapping) else None
    for refund in data if isinstance(data, list) else []:
        _apply(conn, refund, now)


#: Event type -> what applying it does.
HANDLERS: dict[str, Handler] = {
    "refund.created": _refund,
    "refund.updated": _refund,
    "refund.failed": _refund,
    "charge.refunded": _charge_refunded,
}

"""What the example receivers do with a verified event, whatever the framework.

In memory, to keep the examples short and runnable.  A real receiver keeps the processed
event ids and the credited receipts in its database, each under a unique key, and records
them in the same transaction as the work (see "Credit top-ups" in docs/webhooks.md).
"""

import threading
from decimal import Decimal

import svc


class CreditStore:
    """Processed event ids, credited receipts and the credits granted.

    One balance, to keep the example short: a real app adds the credits to the buyer it
    recorded when that buyer started the purchase.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.processed_events: set[str] = set()
        self.credited_receipts: dict[str, Decimal] = {}
        self.credits = Decimal(0)

    def seen(self, event_id: str) -> bool:
        """Whether this event was handled already (a retry, or a replay)."""
        with self._lock:
            return event_id in self.processed_events

    def handle(self, event: svc.Event) -> None:
        """Do an event's work once.  The receivers call it after they have answered."""
        with self._lock:  # check, work and record as one unit, as in one transaction
            if event.id in self.processed_events:
                return  # the event id is the same on every retry: done already
            data = event.data
            if (
                isinstance(data, svc.PaymentSucceededData)  # event.type == "payment.succeeded"
                and data.metadata.sku_kind == "credit_topup"
                and data.metadata.credits
                # spec, Events > Delivery, rule 7: receipt_id is the top-up's dedupe key
                and data.receipt_id not in self.credited_receipts
            ):
                self.credited_receipts[data.receipt_id] = data.metadata.credits
                self.credits += data.metadata.credits
            self.processed_events.add(event.id)

"""What a resource costs and where it is paid (:class:`Offer`): the substance of every 402,
read by the gate core and by every rail that writes a challenge."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

from svc import Resource
from svc.money import format_amount

__all__ = ["Offer"]

_RECEIPT_HEADER_NAMES = ("X-Svc-Receipt", "Payment-Receipt", "PAYMENT-RESPONSE")


def _plain_number(value: Decimal) -> int | float | str:
    if value == value.to_integral_value():
        return int(value)
    return str(value)


@attrs.frozen(kw_only=True)
class Offer:
    """What a resource costs and where it is paid: the substance of every 402."""

    resource_id: str
    amount: Decimal
    currency: str = "USD"
    gate_url: str
    pay_url: str
    active: bool = True
    kind: str = "http"
    path_or_tool: str | None = None
    description: str | None = None
    environment: str | None = None
    sku_kind: str = "one_shot"
    credits: Decimal | None = None
    credit_unit: str | None = None
    #: ``fixed`` or ``metered``: ``amount`` is then the most one payment costs, and the
    #: payer is charged ``units`` used * ``unit_price`` (at most ``max_amount``).
    pricing: str = "fixed"
    unit_price: Decimal | None = None
    unit: str | None = None
    max_amount: Decimal | None = None
    fallback_amount: Decimal | None = None

    @property
    def metered(self) -> bool:
        """Charged by the units the answer used, settled once the whole answer is out."""
        return self.pricing == "metered"

    @classmethod
    def from_resource(cls, resource: Resource) -> Offer:
        meta = resource.metadata
        return cls(
            resource_id=resource.id,
            amount=resource.amount,
            gate_url=resource.gate_url,
            pay_url=resource.pay_url,
            active=resource.active,
            kind=resource.kind,
            path_or_tool=resource.path_or_tool,
            description=resource.description,
            environment=resource.environment,
            sku_kind=meta.sku_kind,
            credits=meta.credits,
            credit_unit=meta.credit_unit,
            pricing=resource.pricing,
            unit_price=resource.unit_price,
            unit=resource.unit,
            max_amount=resource.max_amount,
            fallback_amount=resource.fallback_amount,
        )

    def details(self) -> dict[str, Any]:
        """The 402's ``error.details``: enough for an agent to pay without a second look."""
        details: dict[str, Any] = {
            "resource_id": self.resource_id,
            "amount": format_amount(self.amount),
            "currency": self.currency,
            "gate_url": self.gate_url,
            "pay_url": self.pay_url,
            "sku_kind": self.sku_kind,
        }
        if self.environment is not None:
            details["environment"] = self.environment
        if self.credits is not None:
            details["credits"] = _plain_number(self.credits)
            details["credit_unit"] = self.credit_unit
        if self.metered:  # ``amount`` above is the most it costs: what to authorise
            details["pricing"] = self.pricing
            details["unit"] = self.unit
            for name in ("unit_price", "max_amount", "fallback_amount"):
                value: Decimal | None = getattr(self, name)
                if value is not None:
                    details[name] = format_amount(value)
        if self.description:
            details["description"] = self.description
        details["pay_with"] = (
            f'POST /pay {{"resource_id": "{self.resource_id}"}} with a wallet key, '
            "then send the receipt id in X-Svc-Receipt"
        )
        details["receipt_headers"] = list(_RECEIPT_HEADER_NAMES)
        return details

"""The go-live walk of the spec, driven through the public SDK against a running server.

Go-live order: create seller, create a resource (gate URL), enable payments, register a
webhook for ``payment.succeeded`` (arrives with the webhooks issue), then test with a
wallet (here on the ledger rail, ``POST /pay``; ``pay-url`` arrives with open rails).
Each step prints what a new seller would do next.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import svc

__all__ = ["walk_go_live"]


def walk_go_live(base_url: str, *, echo: Callable[[str], None] = print) -> dict[str, str]:
    with svc.Client(base_url=base_url, environment="test") as anon:
        owner = anon.owners.create(f"demo+{secrets.token_hex(4)}@example.com")
    echo(f"1. owner created: {owner.owner_id} (owner JWT issued)")
    with svc.Client(base_url=base_url, owner_jwt=owner.owner_jwt, environment="test") as oc:
        seller = oc.sellers.create(name="Demo seller")
    echo(f"2. seller created in test: {seller.id}, key {seller.seller_key[:16]}… (shown once)")
    with svc.Client(base_url=base_url, seller_key=seller.seller_key) as sc:
        resource = sc.resources.create(
            kind="http",
            path="/v1/report",
            amount="0.05",
            description="One report",
            metadata={"sku_kind": "one_shot"},
        )
        echo(f"3. resource {resource.id} priced at {resource.amount} USD")
        echo(f"   gate_url (agents pay): {resource.gate_url}")
        echo(f"   pay_url  (humans pay): {resource.pay_url}")
        enabled = sc.sellers.enable_payments()
        echo(f"4. payments enabled: mpp={enabled.mpp_enabled} x402={enabled.x402_enabled}")
        with svc.Client(base_url=base_url, owner_jwt=owner.owner_jwt, environment="test") as oc:
            key = oc.wallet_keys.create(
                name="demo agent", allowance="1.00", period="day", max_per_tx="0.10"
            )
            oc.wallet_keys.fund(key.id, "1.00")
        echo(
            f"5. test wallet key {key.key[:16]}… minted (allowance 1.00/day, 0.10 per "
            "payment) and funded with 1.00 sandbox USD"
        )
        with svc.Client(base_url=base_url, wallet_key=key.key) as agent:
            paid = agent.pay(resource_id=resource.id)
            left = agent.spend.balance()
        echo(
            f"6. agent paid {paid.amount} on the ledger rail: receipt {paid.receipt_id}; "
            f"{left.remaining_allowance} of today's allowance left"
        )
        verdict = sc.access.verify(paid.receipt_id, resource.id)
        balance = sc.sellers.balance()
        echo(
            f"7. seller verified the receipt (valid={verdict.valid}); balance "
            f"{balance.balance} {balance.currency} after the platform fee"
        )
    echo("Next (later releases): register a payment.succeeded webhook, pay with pay-url.")
    return {
        "owner_id": owner.owner_id,
        "seller_id": seller.id,
        "resource_id": resource.id,
        "receipt_id": paid.receipt_id,
    }

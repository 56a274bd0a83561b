"""The go-live walk of the spec, driven through the public SDK against a running server.

Go-live order: create seller, create a resource (gate URL), enable payments, register a
webhook for ``payment.succeeded`` in the same environment, then test with a wallet: its
``pay-url`` pays the resource's ``gate_url`` on an open rail (x402 or MPP, settled on the
sandbox chain), and ``POST /pay`` pays it once more on the ledger rail.  The demo runs its
own tiny webhook receiver on localhost, which verifies each delivery with
``svc.webhooks.verify`` exactly as a seller's backend would.  Each step prints what a new
seller would do next.
"""

from __future__ import annotations

import queue
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import svc
from svc import webhooks

from .invariant import InvariantError

__all__ = ["walk_go_live"]


@contextmanager
def _receiver(secret_box: dict[str, str]) -> Iterator[tuple[str, queue.Queue[svc.Event]]]:
    """A localhost webhook receiver that verifies deliveries and queues the events."""
    events: queue.Queue[svc.Event] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                event = webhooks.verify(secret_box["secret"], raw, dict(self.headers.items()))
            except (svc.WebhookVerificationError, KeyError):
                self.send_response(400)
            else:
                events.put(event)
                self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}/webhooks/svc", events
    finally:
        server.shutdown()


def walk_go_live(base_url: str, *, echo: Callable[[str], None] = print) -> dict[str, str]:
    with svc.Client(base_url=base_url, environment="test") as anon:
        owner = anon.owners.create(f"demo+{secrets.token_hex(4)}@example.com")
    echo(f"1. owner created: {owner.owner_id} (owner JWT issued)")
    oc = svc.Client(base_url=base_url, owner_jwt=owner.owner_jwt, environment="test")
    seller = oc.sellers.create(name="Demo seller")
    echo(f"2. seller created in test: {seller.id}, key {seller.seller_key[:16]}… (shown once)")
    sc = svc.Client(base_url=base_url, seller_key=seller.seller_key)
    resource = sc.resources.create(
        kind="http",
        path="/v1/report",
        amount="0.05",
        description="One report",
        metadata={"sku_kind": "credit_topup", "credits": 10, "credit_unit": "report"},
    )
    echo(f"3. resource {resource.id} priced at {resource.amount} USD (10 report credits)")
    echo(f"   gate_url (agents pay): {resource.gate_url}")
    echo(f"   pay_url  (humans pay): {resource.pay_url}")
    enabled = sc.sellers.enable_payments()
    echo(f"4. payments enabled: mpp={enabled.mpp_enabled} x402={enabled.x402_enabled}")
    secret_box: dict[str, str] = {}
    with _receiver(secret_box) as (hook_url, events):
        endpoint = oc.webhooks.create(hook_url, events=["payment.succeeded"])
        secret_box["secret"] = endpoint.signing_secret
        echo(f"5. webhook {endpoint.id} registered in test for payment.succeeded: {hook_url}")
        key = oc.wallet_keys.create(
            name="demo agent", allowance="1.00", period="day", max_per_tx="0.10"
        )
        oc.wallet_keys.fund(key.id, "1.00")
        echo(
            f"6. test wallet key {key.key[:16]}… minted (allowance 1.00/day, 0.10 per "
            "payment) and funded with 1.00 sandbox USD"
        )
        with svc.Client(base_url=base_url, wallet_key=key.key) as agent:
            unlocked = agent.spend.pay_url(resource.gate_url)
            gate_receipt = str(unlocked.json()["receipt"]["receipt_id"])
            echo(
                f"7. agent's pay-url paid the gate_url {unlocked.amount} on {unlocked.rail} "
                f"(sandbox tx {unlocked.tx_hash[:18] if unlocked.tx_hash else None}…); "
                f"the gate answered {unlocked.upstream_status} with receipt {gate_receipt}"
            )
            paid = agent.pay(resource_id=resource.id)
            left = agent.spend.balance()
        echo(
            f"8. agent paid again on the ledger rail (POST /pay): receipt {paid.receipt_id}; "
            f"{left.remaining_allowance} of today's allowance left"
        )
        verdicts = [sc.access.verify(r, resource.id).valid for r in (gate_receipt, paid.receipt_id)]
        balance = sc.sellers.balance()
        echo(
            f"9. seller verified both receipts (valid={all(verdicts)}); balance "
            f"{balance.balance} {balance.currency} after the platform fee"
        )
        for step in (10, 11):
            try:
                event = events.get(timeout=15)
            except queue.Empty:
                raise RuntimeError("a payment.succeeded webhook did not arrive") from None
            data = event.data
            if not isinstance(data, svc.PaymentSucceededData):
                raise InvariantError("expected isinstance(data, svc.PaymentSucceededData)")
            echo(
                f"{step}. webhook {event.type} ({data.rail}, {data.settlement}) received and "
                f"verified: receipt {data.receipt_id}, +{data.metadata.credits} "
                f"{data.metadata.credit_unit} credits to add"
            )
    oc.close()
    sc.close()
    return {
        "owner_id": owner.owner_id,
        "seller_id": seller.id,
        "resource_id": resource.id,
        "receipt_id": paid.receipt_id,
        "gate_receipt_id": gate_receipt,
    }

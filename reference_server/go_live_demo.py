"""The go-live walk of the spec, driven through the public SDK against a running server.

Go-live order: create seller, create a resource (gate URL), enable payments, register a
webhook for ``payment.succeeded`` in the same environment, then test with a wallet: its
``pay-url`` pays the resource's ``gate_url`` on an open rail (x402 or MPP, settled on the
sandbox chain), and ``POST /pay`` pays it once more on the ledger rail.  The demo runs its
own tiny webhook receiver on localhost, which verifies each delivery with
``svc.webhooks.verify`` exactly as a seller's backend would.  Each step prints what a new
seller would do next.

Then the money leaves: the seller gets a Connect onboarding link (``onboard_url``, which a
person completes in a browser), the demo fills the sandbox onboarding form itself over
HTTP -- saying so, since in real use a human does and no API call can -- syncs
(``payouts_enabled``), withdraws the balance and follows the withdrawal until it is paid.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

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
    email = f"demo+{secrets.token_hex(4)}@example.com"
    with svc.Client(base_url=base_url, environment="test") as anon:
        owner = anon.owners.create(email)
    echo(f"1. owner created: {owner.owner_id} ({email}; its JWT is printed at the end)")
    oc = svc.Client(base_url=base_url, owner_jwt=owner.owner_jwt, environment="test")
    seller = oc.sellers.create(name="Demo seller")
    echo(f"2. seller created in test: {seller.id}, key {seller.seller_key} (shown once)")
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
            f"6. test wallet key {key.key} minted (allowance 1.00/day, 0.10 per "
            "payment) and funded with 1.00 sandbox USD"
        )
        with svc.Client(base_url=base_url, wallet_key=key.key) as agent:
            unlocked = agent.spend.pay_url(resource.gate_url)
            gate_receipt = unlocked.seller_receipt_id
            if gate_receipt is None:
                raise RuntimeError("pay-url did not name the seller's receipt of a gate of ours")
            echo(
                f"7. agent's pay-url paid the gate_url {unlocked.amount} on {unlocked.rail} "
                f"(sandbox tx {unlocked.tx_hash[:18] if unlocked.tx_hash else None}…); "
                f"the gate answered {unlocked.upstream_status} with receipt {gate_receipt} "
                f"(seller_receipt_id; the agent's own is payer_receipt_id "
                f"{unlocked.payer_receipt_id})"
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
        # The receiver stops with the demo: an endpoint left behind would only fail.
        oc.webhooks.delete(endpoint.id)
        echo(f"    webhook {endpoint.id} deleted (its receiver stops with the demo)")
    withdrawal = _payout(sc, echo)
    oc.close()
    sc.close()
    _credentials(base_url, email, owner.owner_jwt, seller.seller_key, key.key, echo)
    return {
        "owner_id": owner.owner_id,
        "seller_id": seller.id,
        "resource_id": resource.id,
        "receipt_id": paid.receipt_id,
        "gate_receipt_id": gate_receipt,
        "withdrawal_id": withdrawal.id,
    }


def _credentials(
    base_url: str,
    email: str,
    owner_jwt: str,
    seller_key: str,
    wallet_key: str,
    echo: Callable[[str], None],
) -> None:
    """The test credentials the demo made, whole, as a reader copies them to carry on
    (README's "Five lines", docs/cli.md): test environment only, sandbox money."""
    echo(
        "\nThe demo's TEST credentials (test environment only: sandbox money, never live). "
        "Carry on from them in a shell, with the svc CLI or svc.Client(), which read these "
        f"variables (the owner JWT expires; `svc-server owners create --email {email}` "
        "issues a fresh one):"
    )
    for name, value in (
        ("SVC_BASE_URL", base_url),
        ("SVC_ENVIRONMENT", "test"),
        ("SVC_OWNER_JWT", owner_jwt),
        ("SVC_SELLER_KEY", seller_key),
        ("SVC_WALLET_KEY", wallet_key),
    ):
        echo(f"export {name}={value}")


class _CsrfField(HTMLParser):
    """The onboarding form's hidden ``csrf`` value, as a browser would send it back."""

    def __init__(self) -> None:
        super().__init__()
        self.value: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("name") == "csrf":
            self.value = a.get("value")


def _fill_sandbox_onboarding(onboard_url: str) -> None:
    """What the person does on the sandbox onboarding page: name, the bank account whose
    payouts succeed, the terms, and **Complete onboarding**."""
    with httpx.Client(timeout=30) as http:
        page = http.get(onboard_url)
        page.raise_for_status()
        form = _CsrfField()
        form.feed(page.text)
        if form.value is None:
            raise RuntimeError("the onboarding page has no form to complete")
        done = http.post(
            onboard_url,
            data={
                "csrf": form.value,
                "legal_name": "Demo Seller LLC",
                "bank_account": "succeeds",
                "tos": "accepted",
                "action": "complete",
            },
        )
        done.raise_for_status()


def _payout(sc: svc.Client, echo: Callable[[str], None], timeout: float = 60) -> svc.Withdrawal:
    """Steps 12-16: onboarding link, the form, sync, withdraw, and the payout followed."""
    link = sc.connect.onboard("US", "express")
    echo(f"12. payouts: onboarding link for a person to complete in a browser: {link.onboard_url}")
    echo("    (an agent hands this link to a human; no API call can complete onboarding)")
    _fill_sandbox_onboarding(link.onboard_url)
    echo(
        "13. the demo fills the sandbox onboarding form itself; in real use a human does "
        "(pressed Complete onboarding)"
    )
    account = sc.connect.sync()
    echo(
        f"14. connect synced: payouts_enabled: {str(account.payouts_enabled).lower()}, "
        f"requirements_due: {account.requirements_due}"
    )
    withdrawal = sc.withdrawals.create()
    echo(
        f"15. withdrew the whole balance, {withdrawal.amount} {withdrawal.currency}: "
        f"withdrawal {withdrawal.id} {withdrawal.status}"
    )
    deadline = time.monotonic() + timeout
    seen = [withdrawal.status]
    while withdrawal.status not in ("paid", "failed"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"withdrawal {withdrawal.id} still {withdrawal.status}")
        time.sleep(0.5)
        withdrawal = sc.withdrawals.get(withdrawal.id)
        if withdrawal.status != seen[-1]:
            seen.append(withdrawal.status)
    if withdrawal.status != "paid":
        raise RuntimeError(f"withdrawal {withdrawal.id} failed: {withdrawal.failure_reason}")
    balance = sc.sellers.balance()
    echo(
        f"16. withdrawal {withdrawal.id}: {' -> '.join(seen)}; the money is out, seller "
        f"balance {balance.balance} {balance.currency}"
    )
    return withdrawal

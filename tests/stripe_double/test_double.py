"""The official SDK against the local Stripe: Connect onboarding, transfers and payouts with
idempotency, Checkout paid and declined through localstripe, faults the SDK retries, and
events that ``stripe.Webhook.construct_event`` verifies."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import stripe
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from stripe.params import TransferCreateParams

from reference_server.store import tables as t

from ..support import LiveApp, LiveServer, serve_asgi, until
from .running import StripeDouble

SECRET = "whsec_double_" + "b" * 24
KEY = "sk_test_double_" + "c" * 16


class Receiver:
    """A webhook endpoint as a server has one: verifies each event with the SDK, keeps it,
    and answers 500 to the first ``fail_next`` deliveries."""

    def __init__(self) -> None:
        self.events: list[stripe.Event] = []
        self.refused = 0
        self.fail_next = 0

    async def handle(self, request: Request) -> Response:
        payload = await request.body()
        try:
            event = stripe.Webhook.construct_event(
                payload, request.headers.get("stripe-signature"), SECRET
            )
        except stripe.SignatureVerificationError:
            self.refused += 1
            return Response(status_code=400)
        if self.fail_next > 0:
            self.fail_next -= 1
            return Response(status_code=500)
        self.events.append(event)
        return Response(status_code=200)

    def wait_for(self, type: str, count: int = 1, timeout: float = 10) -> list[stripe.Event]:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events if e.type == type]
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                seen = [e.type for e in self.events]
                raise AssertionError(f"no {count}x {type} within {timeout}s; seen {seen}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def receiver_app() -> Iterator[tuple[Receiver, LiveApp]]:
    receiver = Receiver()
    live = serve_asgi(Starlette(routes=[Route("/hook", receiver.handle, methods=["POST"])]))
    yield receiver, live
    live.server.should_exit = True
    live.thread.join(10)


@pytest.fixture
def double(stripe_double: StripeDouble, receiver_app: tuple[Receiver, LiveApp]) -> StripeDouble:
    stripe_double.reset()
    stripe_double.set_webhook(receiver_app[1].url + "/hook", SECRET)
    return stripe_double


@pytest.fixture
def receiver(receiver_app: tuple[Receiver, LiveApp]) -> Receiver:
    receiver = receiver_app[0]
    receiver.events.clear()
    receiver.refused = receiver.fail_next = 0
    return receiver


def _express(client: stripe.StripeClient) -> stripe.Account:
    return client.v1.accounts.create(
        {
            "type": "express",
            "country": "US",
            "email": "seller@example.com",
            "metadata": {"svc_account": "acc_1"},
            "capabilities": {"transfers": {"requested": True}},
        }
    )


def _funded(double: StripeDouble, amount: int) -> tuple[stripe.StripeClient, stripe.Account]:
    client = double.client(KEY)
    acct = _express(client)
    double.complete_account(acct.id)
    client.v1.transfers.create({"amount": amount, "currency": "usd", "destination": acct.id})
    return client, acct


def _session(client: stripe.StripeClient, amount: int = 1500) -> stripe.checkout.Session:
    return client.v1.checkout.sessions.create(
        {
            "mode": "payment",
            "line_items": [
                {
                    "price_data": {
                        "currency": "usd",
                        "unit_amount": amount,
                        "product_data": {"name": "Top-up"},
                    },
                    "quantity": 1,
                }
            ],
            "success_url": "http://127.0.0.1:9/done?session={CHECKOUT_SESSION_ID}",
            "cancel_url": "http://127.0.0.1:9/cancel",
            "client_reference_id": "top_1",
            "metadata": {"svc_top_up": "top_1"},
            "payment_intent_data": {"metadata": {"svc_top_up": "top_1"}},
        }
    )


def test_onboarding_link_completes_the_account_and_emits_a_verified_account_updated(
    double: StripeDouble, receiver: Receiver
) -> None:
    client = double.client(KEY)
    acct = _express(client)
    assert (acct.details_submitted, acct.payouts_enabled, acct.charges_enabled) == (
        False,
        False,
        False,
    )
    assert acct.requirements is not None and acct.requirements.currently_due
    link = client.v1.account_links.create(
        {
            "account": acct.id,
            "refresh_url": "http://127.0.0.1:9/refresh",
            "return_url": "http://127.0.0.1:9/return",
            "type": "account_onboarding",
        }
    )
    assert link.object == "account_link" and link.expires_at > link.created
    page = httpx.get(link.url)
    assert "Complete onboarding" in page.text
    form_action = link.url.replace(double.api_base, "")
    done = httpx.post(double.api_base + form_action)
    assert done.status_code == 303 and done.headers["location"] == "http://127.0.0.1:9/return"

    (event,) = receiver.wait_for("account.updated")
    assert event.account == acct.id and event.data.object["id"] == acct.id
    assert event.data.object["payouts_enabled"] is True
    fetched = client.v1.accounts.retrieve(acct.id)
    assert fetched.details_submitted and fetched.requirements is not None
    assert fetched.requirements.currently_due == []

    double.require(acct.id, ["individual.verification.document"])
    later = receiver.wait_for("account.updated", 2)[-1]
    assert later.data.object["payouts_enabled"] is False
    assert later.data.object["requirements"]["currently_due"] == [
        "individual.verification.document"
    ]
    assert receiver.refused == 0

    updated = client.v1.accounts.update(acct.id, {"metadata": {"tier": "gold"}})
    assert updated.metadata is not None
    assert updated.metadata.to_dict() == {"svc_account": "acc_1", "tier": "gold"}
    assert client.v1.accounts.login_links.create(acct.id).object == "login_link"
    standard = client.v1.accounts.create({"type": "standard", "country": "US"})
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.accounts.login_links.create(standard.id)
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.v1.accounts.retrieve("acct_nobody")
    assert missing.value.http_status == 404 and missing.value.code == "resource_missing"


def test_transfer_and_connected_payout_replay_by_idempotency_key(
    double: StripeDouble,
) -> None:
    client = double.client(KEY)
    acct = _express(client)
    params: TransferCreateParams = {
        "amount": 1000,
        "currency": "usd",
        "destination": acct.id,
        "transfer_group": "payout_1",
        "metadata": {"svc_payout": "p1"},
    }
    first = client.v1.transfers.create(params, {"idempotency_key": "tr-key-1"})
    again = client.v1.transfers.create(params, {"idempotency_key": "tr-key-1"})
    assert again.id == first.id and first.destination == acct.id
    assert client.v1.transfers.retrieve(first.id).amount == 1000
    with pytest.raises(stripe.IdempotencyError):
        client.v1.transfers.create({**params, "amount": 999}, {"idempotency_key": "tr-key-1"})

    raw = httpx.post(
        double.api_base + "/v1/transfers",
        data={
            "amount": "1000",
            "currency": "usd",
            "destination": acct.id,
            "transfer_group": "payout_1",
            "metadata[svc_payout]": "p1",
        },
        headers={"Authorization": f"Bearer {KEY}", "Idempotency-Key": "tr-key-1"},
    )
    assert raw.headers["Idempotent-Replayed"] == "true" and raw.json()["id"] == first.id

    connected = double.client(KEY, stripe_account=acct.id)
    balance = connected.v1.balance.retrieve()
    assert [(b.amount, b.currency) for b in balance.available] == [(1000, "usd")]
    payout = connected.v1.payouts.create(
        {"amount": 600, "currency": "usd", "metadata": {"svc_payout": "p1"}},
        {"idempotency_key": "po-key-1"},
    )
    replay = connected.v1.payouts.create(
        {"amount": 600, "currency": "usd", "metadata": {"svc_payout": "p1"}},
        {"idempotency_key": "po-key-1"},
    )
    assert replay.id == payout.id and payout.status == "pending"
    assert connected.v1.payouts.retrieve(payout.id).amount == 600
    assert connected.v1.balance.retrieve().available[0].amount == 400
    with pytest.raises(stripe.InvalidRequestError) as short:
        connected.v1.payouts.create({"amount": 401, "currency": "usd"})
    assert short.value.code == "balance_insufficient" and short.value.http_status == 400
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.payouts.retrieve(payout.id)  # not the platform's: localstripe has none

    double.set_platform_balance(50)
    with pytest.raises(stripe.InvalidRequestError) as platform:
        client.v1.transfers.create({"amount": 51, "currency": "usd", "destination": acct.id})
    assert platform.value.code == "balance_insufficient"

    seen = [r for r in double.requests() if r["path"] == "/v1/payouts"]
    assert [r["idempotency_key"] for r in seen[:2]] == ["po-key-1", "po-key-1"]
    assert all(r["stripe_account"] == acct.id for r in seen)
    assert [r["status"] for r in seen] == [200, 200, 400]


def test_settled_payouts_emit_paid_and_failed_with_the_money_back(
    double: StripeDouble, receiver: Receiver
) -> None:
    _client, acct = _funded(double, 1000)
    connected = double.client(KEY, stripe_account=acct.id)
    paid = connected.v1.payouts.create({"amount": 300, "currency": "usd"})
    failed = connected.v1.payouts.create({"amount": 500, "currency": "usd"})
    assert connected.v1.balance.retrieve().available[0].amount == 200

    double.settle_payout(paid.id, "paid")
    (event,) = receiver.wait_for("payout.paid")
    assert event.account == acct.id and event.data.object["status"] == "paid"
    double.settle_payout(
        failed.id, "failed", failure_code="account_closed", failure_message="closed"
    )
    (bounce,) = receiver.wait_for("payout.failed")
    assert bounce.account == acct.id
    assert bounce.data.object["failure_code"] == "account_closed"
    assert bounce.data.object["failure_message"] == "closed"
    assert connected.v1.payouts.retrieve(failed.id).status == "failed"
    assert connected.v1.balance.retrieve().available[0].amount == 700
    fetched = double.client(KEY).v1.events.retrieve(bounce.id)
    assert fetched.type == "payout.failed"


def test_checkout_paid_through_localstripe_emits_completed(
    double: StripeDouble, receiver: Receiver
) -> None:
    client = double.client(KEY)
    session = _session(client)
    assert (session.status, session.payment_status, session.amount_total) == (
        "open",
        "unpaid",
        1500,
    )
    assert session.id.startswith("cs_test_") and session.url is not None
    page = httpx.get(session.url)
    assert "15.00 USD" in page.text
    done = httpx.post(session.url, data={"card": "4242 4242 4242 4242"})
    assert done.status_code == 303
    assert done.headers["location"] == f"http://127.0.0.1:9/done?session={session.id}"

    (event,) = receiver.wait_for("checkout.session.completed")
    completed = event.data.object
    assert completed["id"] == session.id and completed["payment_status"] == "paid"
    assert completed["client_reference_id"] == "top_1"
    pi_id = completed["payment_intent"]
    # localstripe's own object, read from localstripe directly.
    direct = stripe.StripeClient(KEY, base_addresses={"api": double.localstripe})
    intent = direct.v1.payment_intents.retrieve(pi_id)
    assert intent.status == "succeeded" and intent.amount == 1500
    assert intent.metadata.to_dict() == {"svc_top_up": "top_1"}
    assert client.v1.checkout.sessions.retrieve(session.id).status == "complete"
    # localstripe's own events reach the same endpoint, signed with the same secret.
    receiver.wait_for("payment_intent.succeeded")
    refund = client.v1.refunds.create({"payment_intent": pi_id, "amount": 500})
    assert refund.status == "succeeded" and refund.amount == 500
    (refunded,) = receiver.wait_for("charge.refunded")
    assert refunded.data.object["payment_intent"] == pi_id
    assert refunded.data.object["amount_refunded"] == 500
    listed = client.v1.events.list({"type": "checkout.session.completed"})
    assert [e.id for e in listed.data] == [event.id]


def test_declined_card_keeps_the_session_open_and_abandoning_expires_it(
    double: StripeDouble, receiver: Receiver
) -> None:
    client = double.client(KEY)
    session = _session(client, 900)
    assert session.url is not None
    page = httpx.post(session.url, data={"card": "4000000000000002"})
    assert page.status_code == 402 and "declined" in page.text
    (failed,) = receiver.wait_for("payment_intent.payment_failed")
    assert failed.data.object["last_payment_error"]["code"] == "card_declined"
    intent = failed.data.object["id"]
    direct = stripe.StripeClient(KEY, base_addresses={"api": double.localstripe})
    assert direct.v1.payment_intents.retrieve(intent).status == "requires_payment_method"
    assert client.v1.checkout.sessions.retrieve(session.id).status == "open"

    assert double.pay_checkout(session.id, "4000000000000002")["paid"] is False
    double.abandon_checkout(session.id)
    (expired,) = receiver.wait_for("checkout.session.expired")
    assert expired.data.object["id"] == session.id
    assert client.v1.checkout.sessions.retrieve(session.id).status == "expired"

    other = _session(client, 100)
    assert client.v1.checkout.sessions.expire(other.id).status == "expired"
    with pytest.raises(stripe.InvalidRequestError):
        client.v1.checkout.sessions.expire(other.id)


def test_faults_are_retried_by_the_sdk_or_raised(double: StripeDouble) -> None:
    client, acct = _funded(double, 100)
    double.fault("/v1/transfers", 500, times=1)
    retrying = double.client(KEY, max_network_retries=2)
    made = retrying.v1.transfers.create({"amount": 5, "currency": "usd", "destination": acct.id})
    tries = [r for r in double.requests() if r["path"] == "/v1/transfers"][-2:]
    assert [t["status"] for t in tries] == [500, 200]
    assert tries[0]["idempotency_key"] == tries[1]["idempotency_key"] is not None
    assert client.v1.transfers.retrieve(made.id).amount == 5

    double.fault("/v1/transfers", drop=True, times=1)
    again = retrying.v1.transfers.create({"amount": 6, "currency": "usd", "destination": acct.id})
    last = [r for r in double.requests() if r["path"] == "/v1/transfers"][-2:]
    assert [t["status"] for t in last] == [None, 200] and again.amount == 6

    double.fault("/v1/transfers", 429, times=1)
    with pytest.raises(stripe.RateLimitError):
        client.v1.transfers.create({"amount": 5, "currency": "usd", "destination": acct.id})
    double.fault("/v1/accounts", 503, times=3)
    with pytest.raises(stripe.APIError):
        double.client(KEY, max_network_retries=2).v1.accounts.retrieve(acct.id)
    assert client.v1.accounts.retrieve(acct.id).id == acct.id


def test_deliveries_retry_refused_events_and_redeliver_on_demand(
    double: StripeDouble, receiver: Receiver
) -> None:
    client = double.client(KEY)
    acct = _express(client)
    receiver.fail_next = 2
    double.complete_account(acct.id)
    (event,) = receiver.wait_for("account.updated")
    # The receiver sees the event before the double records its 200: wait for the record.
    (delivery,) = until(
        lambda: [
            d for d in double.deliveries() if d["event"] == event.id and d["status"] != "pending"
        ],
        "the double did not record the delivery",
    )
    assert delivery["status"] == "delivered"
    assert [a["status"] for a in delivery["attempts"]] == [500, 500, 200]

    double.redeliver(event.id)
    twice = receiver.wait_for("account.updated", 2)
    assert twice[1].id == event.id


def test_events_reach_the_reference_servers_processor_webhooks(
    stripe_double: StripeDouble, make_server: Callable[..., LiveServer]
) -> None:
    """The double feeds the server's real endpoint: signatures verify, each event id is
    recorded once, a redelivery is a duplicate."""
    stripe_double.reset()
    server = make_server(
        processor="stripe",
        stripe_api_base=stripe_double.api_base,
        stripe_secret_key=KEY,
        stripe_webhook_secret=SECRET,
    )
    stripe_double.set_webhook(server.url + "/processor/webhooks", SECRET)
    acct = _express(stripe_double.client(KEY))
    stripe_double.complete_account(acct.id)
    (delivery,) = until(
        lambda: [d for d in stripe_double.deliveries() if d["status"] != "pending"],
        "the delivery did not finish",
    )
    assert delivery["status"] == "delivered", delivery
    pe = t.processor_events
    with server.ctx.db.read() as conn:
        rows = conn.execute(select(pe.c.id).where(pe.c.type == "account.updated")).all()
    assert [r.id for r in rows] == [delivery["event"]]  # (localstripe's own events aside)
    stripe_double.redeliver(delivery["event"])
    until(
        lambda: [d["status"] for d in stripe_double.deliveries()[1:2]] not in ([], ["pending"]),
        "the redelivery did not finish",
    )
    assert stripe_double.deliveries()[1]["status"] == "delivered"
    with server.ctx.db.read() as conn:
        again = conn.execute(select(pe.c.id).where(pe.c.type == "account.updated")).all()
    assert [r.id for r in again] == [delivery["event"]]

"""Payout events reach the seller's owner signed, and the SDK reads them as typed events."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import svc
from svc import webhooks

from ..support import LiveServer
from ..webhooks.receiver import Receiver
from .helpers import FAST_PAYOUTS, onboard, shop, wait_for


def test_withdrawal_events_are_delivered_signed(
    make_server: Callable[..., LiveServer], receiver: Receiver
) -> None:
    live = make_server(**FAST_PAYOUTS)
    s = shop(live)
    r = httpx.post(
        live.url + "/webhooks",
        json={
            "url": receiver.url,
            "events": ["seller.withdrawn", "withdrawal.paid", "withdrawal.failed"],
        },
        headers={**s.owner, "Idempotency-Key": "hook"},
    )
    assert r.status_code == 201, r.text
    secret = r.json()["signing_secret"]
    onboard(s)
    w = s.withdraw("3.00").json()
    wait_for(s, w["id"], "paid")
    got = receiver.wait_for(2)
    events = [webhooks.verify(secret, g.body, g.headers) for g in got]
    by_type = {e.type: e.data for e in events}
    withdrawn = by_type["seller.withdrawn"]
    assert isinstance(withdrawn, svc.SellerWithdrawnData)
    assert withdrawn.withdrawal_id == w["id"] and withdrawn.destination == "payout_account"
    paid = by_type["withdrawal.paid"]
    assert isinstance(paid, svc.WithdrawalPaidData)
    assert paid.withdrawal_id == w["id"] and paid.amount == 3 and paid.status == "paid"

"""Auto payout: once payouts are enabled and the available balance reaches the minimum
(the seller's own, or the server's default), the outbox worker pays it all out, with at
most one payout in flight per seller."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx

from ..money.helpers import events_of
from ..support import LiveServer, assert_ledger_sound
from .helpers import FAST_PAYOUTS, Shop, onboard, shop, wait_for


def withdrawals(s: Shop) -> list[dict[str, Any]]:
    r = s.get("/sellers/me/withdrawals?limit=100")
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def wait_count(s: Shop, n: int, seconds: float = 10) -> list[dict[str, Any]]:
    deadline = time.monotonic() + seconds
    while True:
        found = withdrawals(s)
        assert sum(w["status"] in ("pending", "in_transit") for w in found) <= 1
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_the_server_default_minimum_pays_the_balance_out(
    make_server: Callable[..., LiveServer],
) -> None:
    live = make_server(**FAST_PAYOUTS, auto_payout_minimum_micros=5_000_000)
    s = shop(live)  # 9.90, above the 5.00 minimum, but payouts are not enabled yet
    time.sleep(0.3)
    assert withdrawals(s) == []
    account = onboard(s)
    assert account["auto_payout"] is True and account["auto_payout_minimum"] == "5.00"
    (w,) = wait_count(s, 1)
    assert w["automatic"] is True and w["amount"] == "9.90"
    wait_for(s, w["id"], "paid")
    assert s.balance() == Decimal("0.00")
    (withdrawn,) = events_of(live, s.acct.owner_id, "seller.withdrawn")
    assert withdrawn["withdrawal_id"] == w["id"] and withdrawn["request_id"] is None
    assert_ledger_sound(live)


def test_one_payout_in_flight_per_seller(make_server: Callable[..., LiveServer]) -> None:
    live = make_server(
        sandbox_payout_seconds=0.5, worker_poll_seconds=0.05, auto_payout_minimum_micros=5_000_000
    )
    s = shop(live)
    onboard(s)
    (first,) = wait_count(s, 1)
    s.sell(2)  # 19.80 available while the first is in flight: it waits for it
    assert len(wait_count(s, 2, seconds=0.4)) == 1
    wait_for(s, first["id"], "paid")
    found = wait_count(s, 2)
    assert [w["amount"] for w in found] == ["19.80", "9.90"]
    wait_for(s, found[0]["id"], "paid")
    assert_ledger_sound(live)


def test_a_seller_sets_its_own_minimum_or_turns_it_off(
    make_server: Callable[..., LiveServer],
) -> None:
    live = make_server(**FAST_PAYOUTS, auto_payout_minimum_micros=0)  # default: off
    s = shop(live)
    assert s.post("/sellers/me/connect/onboard", {"country": "US"}).status_code == 200
    r = httpx_patch(s, {"auto_payout_minimum": "20.00"})
    assert r["auto_payout_minimum"] == "20.00"
    onboard(s)
    time.sleep(0.3)
    assert withdrawals(s) == []  # 9.90 < 20.00
    s.sell(2)  # 29.70
    (w,) = wait_count(s, 1)
    assert w["amount"] == "29.70" and w["automatic"] is True
    wait_for(s, w["id"], "paid")
    assert httpx_patch(s, {"auto_payout": False})["auto_payout_minimum"] is None
    s.sell(3)
    time.sleep(0.3)
    assert len(withdrawals(s)) == 1
    r = httpx_patch(s, {"auto_payout": True, "auto_payout_minimum": None})
    assert r["auto_payout_minimum"] is None  # the server default, which is off here
    assert_ledger_sound(live)


def httpx_patch(s: Shop, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.patch(s.url + "/sellers/me/connect", json=body, headers=s.auth)
    assert r.status_code == 200, r.text
    return dict(r.json())

"""Metered pricing as a seller sets it and as everyone reads it: the body's rules (one
pricing's fields only, what metered requires), updates, the directory and the SDK."""

from __future__ import annotations

from decimal import Decimal

import httpx

import svc

from ..support import Account, LiveServer
from .helpers import directory, seller

METERED = {
    "pricing": "metered",
    "unit_price": "0.0001",
    "unit": "token",
    "max_amount": "0.50",
    "amount": None,
}


def _problems(r: httpx.Response) -> dict[str, str]:
    assert r.status_code == 422, r.text
    return {e["field"]: e["message"] for e in r.json()["error"]["details"]["errors"]}


def test_a_metered_resource_reads_back_whole_and_is_listed(server: LiveServer) -> None:
    shop = seller(server)
    made = shop.created(**METERED, fallback_amount="0.10", listed=True)
    assert made["pricing"] == "metered"
    assert (made["unit_price"], made["unit"], made["max_amount"]) == ("0.0001", "token", "0.50")
    # ``amount`` is the most one payment costs: enough for a client that ignores pricing.
    assert made["amount"] == "0.50" and made["fallback_amount"] == "0.10"

    [entry] = [e for e in directory(server).json()["data"] if e["id"] == made["id"]]
    assert entry["pricing"] == "metered" and entry["unit_price"] == "0.0001"
    assert entry["max_amount"] == "0.50" and entry["unit"] == "token"

    fixed = shop.created(amount="0.25")
    assert fixed["pricing"] == "fixed" and fixed["amount"] == "0.25"
    assert fixed.get("unit_price") is None and fixed.get("max_amount") is None


def test_each_pricing_takes_its_own_fields_only(server: LiveServer) -> None:
    shop = seller(server)
    both = _problems(shop.create(**{**METERED, "amount": "0.05"}))
    assert "fixed pricing" in both["amount"]
    missing = _problems(shop.create(pricing="metered", amount=None))
    assert set(missing) == {"unit_price", "unit", "max_amount"}
    above = _problems(shop.create(**{**METERED, "unit_price": "0.60"}))
    assert "at most max_amount" in above["unit_price"]
    stray = _problems(shop.create(amount="0.05", unit_price="0.01", max_amount="1"))
    assert set(stray) == {"unit_price", "max_amount"}
    assert "pricing" in _problems(shop.create(pricing="per_token"))
    assert "unit" in _problems(shop.create(**{**METERED, "unit": "to ken"}))
    assert "amount" in _problems(shop.create(amount=None))


def test_updates_keep_the_pricing(server: LiveServer) -> None:
    shop = seller(server)
    metered = shop.created(**METERED)
    r = shop.patch(metered["id"], max_amount="1.00", unit_price="0.0002")
    assert r.status_code == 200, r.text
    assert (r.json()["max_amount"], r.json()["amount"], r.json()["unit_price"]) == (
        "1.00",
        "1.00",
        "0.0002",
    )
    assert "max_amount" in _problems(shop.patch(metered["id"], amount="0.10"))["amount"]
    too_dear = _problems(shop.patch(metered["id"], unit_price="2"))
    assert "at most max_amount (1.00)" in too_dear["unit_price"]
    fixed = shop.created(amount="0.05")
    assert "only for metered" in _problems(shop.patch(fixed["id"], unit_price="0.01"))["unit_price"]


def test_the_sdk_creates_a_metered_resource(server: LiveServer, account: Account) -> None:
    with svc.Client(base_url=server.url, seller_key=account.seller_key, max_retries=0) as client:
        made = client.resources.create(
            kind="http",
            path="/v1/chat",
            pricing="metered",
            unit_price="0.0001",
            unit="token",
            max_amount=Decimal("0.5"),
        )
    assert made.pricing == "metered" and made.max_amount == Decimal("0.5")
    assert made.unit_price == Decimal("0.0001") and made.fallback_amount is None


def test_metered_amount_is_capped_and_rounded_down() -> None:
    assert svc.money.metered_amount(3, Decimal("0.0001"), Decimal("0.50")) == Decimal("0.0003")
    assert svc.money.metered_amount(10**9, Decimal("0.0001"), Decimal("0.50")) == Decimal("0.50")
    assert svc.money.metered_amount(7, Decimal("0.000001"), Decimal("1")) == Decimal("0.000007")
    assert svc.money.metered_amount(0, Decimal("0.0001"), Decimal("0.50")) == 0

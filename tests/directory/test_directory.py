"""``GET /directory``: what is in it (listed, active, the request's environment), what an
entry shows and hides, its rails, its filters and paging."""

from __future__ import annotations

from datetime import datetime

import httpx

from ..support import LiveServer
from .helpers import DEMO_SELLER, directory, entries, ids, refused, seller

ENTRY_FIELDS = {
    "id",
    "kind",
    "amount",
    "gate_url",
    "pay_url",
    "rails",
    "description",
    "method",
    "body_hint",
    "pricing",
    "unit_price",
    "unit",
    "max_amount",
    "fallback_amount",
    "seller_name",
    "environment",
    "created_at",
}


def test_listed_active_resources_of_the_environment_only(server: LiveServer) -> None:
    shop = seller(server)
    hint = {"city": "Lisbon", "days": 7, "units": {"temperature": "C"}}
    listed = shop.created(
        description="A forecast", method="POST", body_hint=hint, listed=True, amount="0.25"
    )
    unlisted = shop.created(description="Private", listed=False)
    default = shop.created(description="Left out of the directory by default")
    gone = shop.created(description="Deactivated", listed=True)
    deactivate = shop.patch(gone["id"], active=False)
    assert deactivate.status_code == 200, deactivate.text
    live_shop = seller(server, "live")
    in_live = live_shop.created(description="A live one", listed=True)

    test_ids = ids(directory(server, "test"))
    assert test_ids == [listed["id"]]
    assert unlisted["id"] not in test_ids and default["id"] not in test_ids
    assert ids(directory(server, "live")) == [in_live["id"]]
    assert ids(directory(server, None)) == [in_live["id"]]  # absent header: live

    [entry] = entries(directory(server, "test"))
    assert set(entry) == ENTRY_FIELDS
    assert entry["body_hint"] == hint and entry["method"] == "POST"
    assert (entry["amount"], entry["kind"], entry["description"]) == ("0.25", "http", "A forecast")
    assert entry["gate_url"] == listed["gate_url"] and entry["pay_url"] == listed["pay_url"]
    assert entry["seller_name"] == "shop" and entry["environment"] == "test"
    assert entry["rails"] == ["rill"]  # payments not enabled: the ledger rail only
    assert datetime.fromisoformat(entry["created_at"])

    # Listing and unlisting later is a PATCH away.
    assert shop.patch(unlisted["id"], listed=True).status_code == 200
    assert shop.patch(listed["id"], listed=False).status_code == 200
    assert ids(directory(server, "test")) == [unlisted["id"]]


def test_the_demonstration_gate_is_listed(server: LiveServer) -> None:
    """Every server sells its demonstration gate in both environments, listed."""
    for environment in ("test", "live"):
        [demo] = [e for e in directory(server, environment).json()["data"]]
        assert demo["seller_name"] == DEMO_SELLER and demo["amount"] == "0.01"
        assert demo["environment"] == environment and demo["method"] is None


def test_an_entry_hides_what_the_seller_keeps(server: LiveServer) -> None:
    shop = seller(server)
    shop.created(
        listed=True,
        path="/internal/v2/secret",
        metadata={"sku_kind": "one_shot", "note": "private"},
        upstream_url="http://127.0.0.1:9/upstream",
    )
    r = directory(server)
    text = r.text
    for secret in ("/internal/v2/secret", "private", "upstream", "seller_id", "metadata"):
        assert secret not in text, secret
    assert "authorization" not in {h.lower() for h in r.request.headers}


def test_rails_follow_the_sellers_payments(server: LiveServer) -> None:
    shop = seller(server)
    shop.created(listed=True)
    assert entries(directory(server))[0]["rails"] == ["rill"]
    shop.enable_payments()
    assert entries(directory(server))[0]["rails"] == ["x402", "mpp", "rill"]


def test_filters(server: LiveServer) -> None:
    shop = seller(server)
    weather = shop.created(listed=True, description="Weather FORECAST, 100% fresh", amount="1")
    owls = shop.created(listed=True, description="Owl sightings", amount="0.10")
    tool = shop.created(kind="mcp", path=None, tool="search", listed=True, amount="0.5")
    bare = shop.created(listed=True, amount="2")  # no description

    assert ids(directory(server, kind="mcp")) == [tool["id"]]
    assert ids(directory(server, kind="http")) == [weather["id"], owls["id"], bare["id"]]
    assert ids(directory(server, q="forecast")) == [weather["id"]]
    assert ids(directory(server, q="100%")) == [weather["id"]]  # % is text, not a pattern
    assert ids(directory(server, q="%")) == [weather["id"]]
    assert ids(directory(server, q="_")) == []
    assert ids(directory(server, max_amount="0.5")) == [owls["id"], tool["id"]]
    assert ids(directory(server, max_amount="0.1")) == [owls["id"]]
    assert ids(directory(server, kind="http", max_amount="1.00", q="o")) == [
        weather["id"],
        owls["id"],
    ]

    assert refused(directory(server, kind="rest"), "kind") == "must be one of http, mcp"
    assert "decimal string" in refused(directory(server, max_amount="-1"), "max_amount")
    refused(directory(server, max_amount="0.0000001"), "max_amount")
    refused(directory(server, q=""), "q")
    refused(directory(server, q="x" * 201), "q")
    refused(directory(server, q="a\x00b"), "q")
    message = refused(directory(server, query="owls"), "query")
    assert message == "is not a known parameter (limit, starting_after, kind, q, max_amount)"
    r = directory(server, kind="mcp", q="")
    assert {e["field"] for e in r.json()["error"]["details"]["errors"]} == {"q"}


def test_paging_with_a_filter(server: LiveServer) -> None:
    shop = seller(server)
    made = [shop.created(listed=True, kind="mcp", path=None, tool=f"t{i}") for i in range(5)]
    shop.created(listed=True)  # an http one between the pages' filter
    first = directory(server, kind="mcp", limit=2).json()
    assert first["has_more"] is True and len(first["data"]) == 2
    seen = [e["id"] for e in first["data"]]
    while True:
        page = directory(server, kind="mcp", limit=2, starting_after=seen[-1]).json()
        seen += [e["id"] for e in page["data"]]
        if not page["has_more"]:
            break
    assert seen == [m["id"] for m in made]

    # A cursor that left the directory since (deactivated) still marks the place.
    assert shop.patch(made[1]["id"], active=False).status_code == 200
    after = directory(server, kind="mcp", starting_after=made[1]["id"])
    assert ids(after) == [m["id"] for m in made[2:]]
    # An unlisted resource, or one of the other environment, is no cursor of it.
    hidden = shop.created(listed=False)
    refused(directory(server, starting_after=hidden["id"]), "starting_after")
    refused(directory(server, "live", starting_after=made[0]["id"]), "starting_after")


def test_the_environment_header_is_checked(server: LiveServer) -> None:
    r = directory(server, "staging")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_environment"


def test_llms_txt_points_to_the_directory(server: LiveServer) -> None:
    text = httpx.get(server.url + "/llms.txt").text
    assert f"GET {server.url}/directory (no auth" in text
    assert "body_hint with your own values" in text
    assert "- GET /directory (auth: none): " in text

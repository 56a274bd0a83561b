"""A resource's ``method`` (the one its hosted gate sells) and ``body_hint`` (a JSON body
for callers to copy): their rules on create and update, and the gate's 405."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from ..gate.support import open_shop
from ..money.helpers import events_of
from ..support import LiveServer, new_account
from .helpers import Seller, refused, seller

HINT: dict[str, Any] = {"city": "Lisbon", "days": 7, "ratio": 0.5, "tags": ["a", None, True]}


def test_body_hint_round_trips(server: LiveServer) -> None:
    shop = seller(server)
    made = shop.created(method="POST", body_hint=HINT)
    assert made["method"] == "POST" and made["body_hint"] == HINT
    r = httpx.get(f"{server.url}/resources/{made['id']}", headers=shop.headers)
    assert r.json()["body_hint"] == HINT and r.json()["method"] == "POST"
    for method in ("PUT", "PATCH"):
        assert shop.created(method=method, body_hint={"x": 1})["body_hint"] == {"x": 1}
    plain = shop.created()
    assert plain["method"] is None and plain["body_hint"] is None
    assert shop.created(method="DELETE")["method"] == "DELETE"


@pytest.mark.parametrize("method", [None, "GET", "DELETE"])
def test_a_body_hint_needs_a_method_with_a_body(server: LiveServer, method: str | None) -> None:
    body: dict[str, Any] = {"body_hint": {"city": "Lisbon"}}
    if method is not None:
        body["method"] = method
    message = refused(seller(server).create(**body), "body_hint")
    wanted = "any method" if method is None else method
    assert message == f"goes only with method POST, PUT or PATCH (a body to send), not {wanted}"


def test_bad_methods_and_hints_are_refused(server: LiveServer) -> None:
    shop = seller(server)
    assert "GET" in refused(shop.create(method="TRACE"), "method")
    refused(shop.create(method="post"), "method")
    refused(shop.create(method="POST", body_hint=["not", "an", "object"]), "body_hint")
    refused(shop.create(method="POST", body_hint="{}"), "body_hint")
    big = {"text": "x" * 4096}
    assert len(json.dumps(big)) > 4096
    assert "4096" in refused(shop.create(method="POST", body_hint=big), "body_hint")
    fits = {"text": "x" * 4000}
    assert shop.created(method="POST", body_hint=fits)["body_hint"] == fits


def test_updating_method_and_body_hint(server: LiveServer) -> None:
    shop = seller(server)
    made = shop.created(method="POST", body_hint=HINT)
    rid = made["id"]

    r = shop.patch(rid, body_hint={"city": "Porto"})
    assert r.status_code == 200 and r.json()["body_hint"] == {"city": "Porto"}
    r = shop.patch(rid, amount="0.07")  # left out: both kept
    assert (r.json()["method"], r.json()["body_hint"]) == ("POST", {"city": "Porto"})

    message = refused(shop.patch(rid, method="GET"), "method")
    assert message == (
        "GET takes no body but the resource has a body_hint: "
        "clear it (body_hint: null) in the same request"
    )
    assert "any method" in refused(shop.patch(rid, method=None), "method")
    refused(shop.patch(rid, method="GET", body_hint={"still": "here"}), "body_hint")

    r = shop.patch(rid, method="GET", body_hint=None)
    assert r.status_code == 200, r.text
    assert (r.json()["method"], r.json()["body_hint"]) == ("GET", None)
    r = shop.patch(rid, method=None)
    assert r.status_code == 200 and r.json()["method"] is None
    refused(shop.patch(rid, body_hint={"a": 1}), "body_hint")  # any method: no hint
    r = shop.patch(rid, method="PATCH", body_hint={"a": 1})
    assert (r.json()["method"], r.json()["body_hint"]) == ("PATCH", {"a": 1})
    r = shop.patch(rid, body_hint=None)
    assert (r.json()["method"], r.json()["body_hint"]) == ("PATCH", None)


def test_a_change_of_method_is_an_event(server: LiveServer) -> None:
    account = new_account(server.url)
    shop = Seller(server, account.seller_key, account.owner_jwt, "test")
    made = shop.created()
    assert shop.patch(made["id"], method="POST", body_hint={"q": "owls"}).status_code == 200
    [data] = events_of(server, account.owner_id, "resource.updated")
    assert data["changed"] == ["body_hint", "method"]
    assert data["resource"]["method"] == "POST"
    assert data["resource"]["body_hint"] == {"q": "owls"}


def test_the_hosted_gate_sells_its_method_only(server: LiveServer) -> None:
    shop = open_shop(server, price="0.05")
    shop.seller.resources.update(shop.resource.id, method="POST", body_hint={"q": "owls"})
    gate = shop.resource.gate_url

    for method in ("GET", "PUT", "DELETE", "OPTIONS"):
        r = httpx.request(method, gate)
        assert r.status_code == 405, (method, r.text)
        assert r.headers["allow"] == "POST"
        assert r.json()["error"]["code"] == "method_not_allowed"
        assert "sells POST requests only" in r.json()["error"]["message"]
    assert httpx.post(gate, json={"q": "owls"}).status_code == 402

    paid = shop.agent.pay(resource_id=shop.resource.id)
    receipt = {"X-Svc-Receipt": paid.receipt_id}
    wrong = httpx.get(gate, headers=receipt)  # a receipt does not change the method
    assert wrong.status_code == 405
    ok = httpx.post(gate, json={"q": "owls"}, headers=receipt)
    assert ok.status_code == 200, ok.text
    assert ok.json()["resource"]["method"] == "POST"
    assert ok.json()["resource"]["body_hint"] == {"q": "owls"}

    # GET-only: HEAD is GET's; the Allow header says both.
    shop.seller.resources.update(shop.resource.id, method="GET", body_hint=None)
    assert httpx.head(gate).status_code == 402
    r = httpx.post(gate)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    # Back to any method.
    shop.seller.resources.update(shop.resource.id, method=None)
    for method in ("GET", "POST", "DELETE"):
        assert httpx.request(method, gate).status_code == 402

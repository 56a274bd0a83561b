"""One paging contract on every list route, generated from the route table.

Which routes are lists is read from ``reference_server.app.endpoints()`` (``Endpoint.paged``,
set by ``web.paging.paged``) and checked against what the routes answer: every GET whose
answer is a list must be marked.  Each marked route needs a factory below (a route without
one fails :func:`test_every_list_route_has_a_factory`); the walk then fills its list past
two pages, follows ``starting_after`` with ``limit=2`` until ``has_more`` is false, and
checks that every item is seen once, in the route's order.  Ties on ``created_at`` are
forced by a server whose clock stands still, so the order falls to ids alone.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx
import pytest
from eth_account import Account as EthAccount

import svc
from reference_server.app import endpoints
from reference_server.web import paging
from reference_server.web.auth import Role
from reference_server.web.endpoint import Endpoint

from ..payouts.helpers import complete_onboarding
from ..support import Account, LiveServer, new_account

LISTS = [ep for ep in endpoints() if ep.paged]
#: GET routes that answer ``data`` but are not lists of the caller's objects, and why.
NOT_LISTS = {
    "/webhooks/events": "the fixed catalog of event types the service emits (docs/api.md)",
    "/webhooks/{webhook_id}/listen": "a queue, not a list: the deliveries leased to a "
    "listener now, each handed out once (svc listen, docs/webhooks.md)",
}


@attrs.frozen
class World:
    """One owner's account on a live server, with a webhook endpoint that no event reaches
    (its deliveries are only the test sends)."""

    http: httpx.Client
    account: Account
    webhook_id: str

    def headers(self, role: Role | None) -> dict[str, str]:
        return {"X-Svc-Environment": "test", **(self.account.bearer(role) if role else {})}

    def post(self, role: Role, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {**self.headers(role), "Idempotency-Key": secrets.token_hex(8)}
        r = self.http.post(path, json=body, headers=headers)
        assert r.status_code in (200, 201), r.text
        return dict(r.json())


@contextmanager
def world(live: LiveServer) -> Iterator[World]:
    account = new_account(live.url)
    with httpx.Client(base_url=live.url, timeout=30) as http:
        w = World(http=http, account=account, webhook_id="")
        hook = w.post(
            Role.OWNER,
            "/webhooks",
            {"url": live.url + "/nowhere", "events": ["allowance.reset"]},
        )
        yield attrs.evolve(w, webhook_id=hook["id"])


def _resources(w: World) -> None:
    path = f"/p/{secrets.token_hex(4)}"
    w.post(Role.SELLER, "/resources", {"kind": "http", "path": path, "amount": "0.01"})


def _listed(w: World) -> None:
    """A resource in the directory (which is everyone's: the world's own items are
    the only ones there, the server being the test's own)."""
    path = f"/d/{secrets.token_hex(4)}"
    body = {"kind": "http", "path": path, "amount": "0.01", "listed": True}
    w.post(Role.SELLER, "/resources", body)


def _unlisted(w: World) -> str:
    """Not in the directory: an unlisted resource's id is no cursor of it."""
    body = {"kind": "http", "path": "/hidden", "amount": "0.01"}
    return str(w.post(Role.SELLER, "/resources", body)["id"])


def _top_up(w: World) -> str:
    """A top-up paid from a sandbox faucet wallet, as the SDK pays it."""
    payer = EthAccount.create()
    w.post(Role.OWNER, "/sandbox/faucet", {"address": payer.address, "amount": "0.01"})
    base = str(w.http.base_url).rstrip("/")
    with svc.Client(base_url=base, owner_jwt=w.account.owner_jwt, environment="test") as owner:
        return owner.top_ups.create("0.01", payer=payer).id


def _attempts(w: World) -> None:
    """A pay-url of a URL that does not ask for payment: refused, but an attempt."""
    headers = {**w.headers(Role.WALLET), "Idempotency-Key": secrets.token_hex(8)}
    url = str(w.http.base_url) + "/health"
    r = w.http.post("/spend/pay-url", json={"url": url}, headers=headers)
    assert r.json()["error"]["code"] == "not_payable", r.text


def _payouts_ready(w: World) -> None:
    """Once per world: the seller is onboarded (through the sandbox page, as a person) and
    has sold something, so it can withdraw."""
    connect = w.http.get("/sellers/me/connect", headers=w.headers(Role.SELLER)).json()
    if connect["payouts_enabled"]:
        return
    link = w.post(Role.SELLER, "/sellers/me/connect/onboard", {"country": "US"})
    assert complete_onboarding(link["onboard_url"]).status_code == 200
    assert w.post(Role.SELLER, "/sellers/me/connect/sync", {})["payouts_enabled"] is True
    sale = w.post(Role.SELLER, "/resources", {"kind": "http", "path": "/s", "amount": "10"})
    w.post(Role.OWNER, f"/wallet-keys/{w.account.wallet_key_id}/fund", {"amount": "10.00"})
    w.post(Role.WALLET, "/pay", {"resource_id": sale["id"]})


def _withdrawals(w: World) -> None:
    _payouts_ready(w)
    w.post(Role.SELLER, "/sellers/me/withdraw", {"amount": "0.01"})


def _refunds(w: World) -> None:
    """The account's agent buys from its own seller, which refunds it."""
    path = f"/r/{secrets.token_hex(4)}"
    sale = w.post(Role.SELLER, "/resources", {"kind": "http", "path": path, "amount": "0.01"})
    w.post(Role.OWNER, f"/wallet-keys/{w.account.wallet_key_id}/fund", {"amount": "0.01"})
    paid = w.post(Role.WALLET, "/pay", {"resource_id": sale["id"]})
    w.post(Role.SELLER, "/refunds", {"receipt_id": paid["receipt_id"]})


def _approvals(w: World) -> None:
    """A payment over the key's approval line: nothing paid, an approval pending."""
    key = w.account.wallet_key_id
    w.http.patch(
        f"/wallet-keys/{key}",
        json={"policy": {"approval_above": "0.001"}},
        headers={**w.headers(Role.OWNER), "Idempotency-Key": secrets.token_hex(8)},
    ).raise_for_status()
    path = f"/a/{secrets.token_hex(4)}"
    sale = w.post(Role.SELLER, "/resources", {"kind": "http", "path": path, "amount": "0.01"})
    w.post(Role.OWNER, f"/wallet-keys/{key}/fund", {"amount": "0.01"})
    headers = {**w.headers(Role.WALLET), "Idempotency-Key": secrets.token_hex(8)}
    r = w.http.post("/pay", json={"resource_id": sale["id"]}, headers=headers)
    assert r.status_code == 202, r.text


@attrs.frozen
class Factory:
    """Adds one item to a list; ``order`` is the route's documented order."""

    add: Callable[[World], object]
    order: str  # "asc": oldest first; "desc": newest first
    #: A public list (the directory) shows other accounts' items too: an id the list
    #: never shows, made in another world, stands for "someone else's item".
    hidden: Callable[[World], str] | None = None


FACTORIES: dict[str, Factory] = {
    "/sellers": Factory(lambda w: w.post(Role.OWNER, "/sellers", {"name": "s"}), "asc"),
    "/resources": Factory(_resources, "asc"),
    "/directory": Factory(_listed, "asc", hidden=_unlisted),
    "/wallet-keys": Factory(lambda w: w.post(Role.OWNER, "/wallet-keys", {"name": "k"}), "asc"),
    "/owners/me/top-ups": Factory(_top_up, "desc"),
    "/webhooks": Factory(
        lambda w: w.post(Role.OWNER, "/webhooks", {"url": str(w.http.base_url) + "/nowhere"}), "asc"
    ),
    "/webhooks/{webhook_id}/deliveries": Factory(
        lambda w: w.post(Role.OWNER, f"/webhooks/{w.webhook_id}/test", {}), "desc"
    ),
    "/spend/attempts": Factory(_attempts, "desc"),
    "/spend/approvals": Factory(_approvals, "desc"),
    "/sellers/me/withdrawals": Factory(_withdrawals, "desc"),
    "/sellers/{seller_id}/resources": Factory(_resources, "asc"),
    "/sellers/{seller_id}/withdrawals": Factory(_withdrawals, "desc"),
    "/refunds": Factory(_refunds, "desc"),
}


def _path(ep: Endpoint, w: World) -> str:
    return ep.path.format(webhook_id=w.webhook_id, seller_id=w.account.seller_id)


def _get(w: World, ep: Endpoint, **params: Any) -> httpx.Response:
    return w.http.get(_path(ep, w), params=params, headers=w.headers(ep.role))


def _walk(w: World, ep: Endpoint, limit: int) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": limit}
    for _ in range(100):
        r = _get(w, ep, **params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["data"]) <= limit
        seen += body["data"]
        if not body["has_more"]:
            return seen
        assert body["data"], "has_more with an empty page"
        params["starting_after"] = body["data"][-1]["id"]
    raise AssertionError(f"{ep.path}: has_more never became false")


def test_every_list_route_has_a_factory() -> None:
    assert sorted(ep.path for ep in LISTS) == sorted(FACTORIES)
    assert all(ep.method == "GET" for ep in LISTS)


@pytest.fixture(params=["clock", "ties"])
def paging_server(request: pytest.FixtureRequest, make_server: Any) -> LiveServer:
    """A server on the real clock, or one whose clock stands still (every item of a list
    created at the same instant: the order is the ids')."""
    if request.param == "ties":
        frozen = datetime.now(UTC)
        return make_server(clock=lambda: frozen)  # type: ignore[no-any-return]
    return make_server()  # type: ignore[no-any-return]


@pytest.mark.parametrize("ep", LISTS, ids=lambda ep: ep.path)
def test_pages_walk_every_item_once_in_order(
    paging_server: LiveServer, ep: Endpoint, request: pytest.FixtureRequest
) -> None:
    factory = FACTORIES[ep.path]
    with world(paging_server) as w:
        for _ in range(5):
            factory.add(w)
        whole = _get(w, ep, limit=paging.MAX_LIMIT).json()
        assert whole["has_more"] is False and len(whole["data"]) >= 5
        walked = _walk(w, ep, limit=2)
        ids = [item["id"] for item in walked]
        assert len(ids) == len(set(ids)), "an item was seen twice"
        assert ids == [item["id"] for item in whole["data"]]
        keys = [(datetime.fromisoformat(item["created_at"]), item["id"]) for item in walked]
        assert keys == sorted(keys, reverse=factory.order == "desc")
        if request.node.callspec.params["paging_server"] == "ties":
            assert len({created for created, _ in keys}) == 1, "the clock was to stand still"

        default = _get(w, ep).json()["data"]
        assert [item["id"] for item in default] == ids[: paging.DEFAULT_LIMIT]


def _refused(r: httpx.Response, field: str) -> None:
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == "validation_error", body
    assert field in [e["field"] for e in body["error"]["details"]["errors"]], body
    assert body["request_id"] == r.headers["x-request-id"]


@pytest.mark.parametrize("ep", LISTS, ids=lambda ep: ep.path)
def test_bad_cursors_and_limits_are_422(server: LiveServer, ep: Endpoint) -> None:
    factory = FACTORIES[ep.path]
    with world(server) as other:
        factory.add(other)
        if factory.hidden is not None:
            foreign = factory.hidden(other)
        else:
            foreign = _get(other, ep).json()["data"][0]["id"]
    with world(server) as w:
        factory.add(w)
        for cursor in ("nope", "res_00000000000000000000000000", foreign, "x" * 41, "a b"):
            _refused(_get(w, ep, starting_after=cursor), "starting_after")
        for limit in ("0", "101", "abc", "-1", "1.5", "²", " 5", ""):
            _refused(_get(w, ep, limit=limit), "limit")
        path = _path(ep, w)
        for query in ("starting_after=%00", "starting_after=a%00b", "starting_after=%E9"):
            _refused(w.http.get(f"{path}?{query}", headers=w.headers(ep.role)), "starting_after")
        _refused(w.http.get(f"{path}?limit=1&limit=2", headers=w.headers(ep.role)), "limit")
        _refused(_get(w, ep, limt=5), "limt")
        both = _get(w, ep, limit=0, starting_after="a;b").json()["error"]["details"]["errors"]
        assert {e["field"] for e in both} == {"limit", "starting_after"}


def test_every_get_answering_a_list_is_paged(server: LiveServer) -> None:
    """Probe every GET of the route table with its role's credential: an answer with
    ``data`` or ``has_more`` must come from a paged route (or be a documented non-list)."""
    with world(server) as w:
        resource = w.post(
            Role.SELLER, "/resources", {"kind": "http", "path": "/probe", "amount": "0.01"}
        )
        handle = "h" + secrets.token_hex(4)
        w.post(Role.OWNER, "/handles", {"handle": handle})
        address = "0x" + "11" * 20
        faucet = w.post(Role.OWNER, "/sandbox/faucet", {"address": address, "amount": "1.00"})
        _payouts_ready(w)
        withdrawal = w.post(Role.SELLER, "/sellers/me/withdraw", {"amount": "0.01"})
        w.post(Role.OWNER, f"/wallet-keys/{w.account.wallet_key_id}/fund", {"amount": "1.00"})
        paid = w.post(Role.WALLET, "/pay", {"resource_id": resource["id"]})
        refund = w.post(
            Role.SELLER, "/refunds", {"receipt_id": paid["receipt_id"], "amount": "0.01"}
        )
        _approvals(w)
        approvals = w.http.get("/spend/approvals", headers=w.headers(Role.WALLET)).json()
        values = {
            "approval_id": approvals["data"][0]["id"],
            "receipt_id": paid["receipt_id"],
            "top_up_id": _top_up(w),
            "resource_id": resource["id"],
            "key_id": w.account.wallet_key_id,
            "webhook_id": w.webhook_id,
            "destination": "@" + handle,
            "address": address,
            "tx_hash": faucet["transaction"],
            "seller_id": w.account.seller_id,
            "withdrawal_id": withdrawal["id"],
            "refund_id": refund["id"],
        }
        listener = w.post(Role.OWNER, "/webhooks/listen", {})["id"]
        answered_lists = set()
        for ep in endpoints():
            if ep.method != "GET":
                continue
            listens = ep.path == "/webhooks/{webhook_id}/listen"
            path = ep.path.format(**{**values, "webhook_id": listener} if listens else values)
            r = w.http.get(path, headers=w.headers(ep.role))
            assert r.status_code == 200, (ep.path, r.text)
            body = r.json()
            if "has_more" in body or isinstance(body.get("data"), list):
                answered_lists.add(ep.path)
            if ep.paged:
                assert isinstance(body["has_more"], bool) and isinstance(body["data"], list)
        paged = {ep.path for ep in LISTS}
        assert answered_lists - set(NOT_LISTS) == paged


def test_the_openapi_document_states_the_paging_parameters(server: LiveServer) -> None:
    paths = httpx.get(server.url + "/agent-openapi.json").json()["paths"]
    for ep in endpoints():
        names = {p["name"] for p in paths[ep.path][ep.method.lower()].get("parameters", [])}
        assert ("limit" in names and "starting_after" in names) == ep.paged, ep.path

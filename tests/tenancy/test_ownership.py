"""No answer carries another tenant's data: every route of the route table, called with
every credential of every owner of the shared world (and with none), naming every
owner's objects in its path and body, answers only ids that belong to the caller.

The database is the oracle (:mod:`.oracle`): each id found in an answer (its body and
the headers that name objects) must belong to the credential that asked (its owner, its
seller or its wallet key, and its environment), or be public.  Calls run eight at a
time, as clients do; the routes that destroy what later calls use (revoking, deleting,
deactivating, withdrawing) run after all the others.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import httpx
import pytest
from sqlalchemy import select

from reference_server.app import served
from reference_server.store import tables as t
from reference_server.web.endpoint import Endpoint, OptionalAuth
from svc.schema import example_of

from .oracle import PUBLIC, Oracle, ids_in
from .world import ENVIRONMENTS, World

#: Routes whose effect later calls would miss: called last.
ROLES = ("owner", "seller", "wallet")
DESTRUCTIVE = re.compile(r"/(revoke|deactivate|withdraw|recycle|refund|refunds)$")
#: Headers of an answer that name objects.
NAMING_HEADERS = ("location", "x-svc-receipt", "payment-receipt", "payment-response")


@attrs.frozen
class Caller:
    label: str
    role: str | None
    headers: dict[str, str]
    #: The parties it speaks for (``owner:…``, ``seller:…``, ``key:…``).
    party: str | None
    environment: str


@attrs.frozen
class Call:
    caller: Caller
    endpoint: Endpoint
    path: str
    body: Any


def callers(world: World) -> list[Caller]:
    found = [Caller("anonymous", None, {}, None, env) for env in ENVIRONMENTS]
    for owner in world.owners:
        for env in ENVIRONMENTS:
            headers = {"Authorization": f"Bearer {owner.jwt}", "X-Svc-Environment": env}
            found.append(
                Caller(f"{owner.name}:owner:{env}", "owner", headers, f"owner:{owner.id}", env)
            )
        for (env, name), seller in owner.sellers.items():
            headers = {"Authorization": f"Bearer {seller.key}", "X-Svc-Environment": env}
            label = f"{owner.name}:seller:{name}:{env}"
            found.append(Caller(label, "seller", headers, f"seller:{seller.id}", env))
        for (env, name), key in owner.wallet_keys.items():
            headers = {"Authorization": f"Bearer {key.key}", "X-Svc-Environment": env}
            label = f"{owner.name}:wallet:{name}:{env}"
            found.append(Caller(label, "wallet", headers, f"key:{key.id}", env))
    return found


def dashboard_callers(world: World) -> list[Caller]:
    """Each owner signed in to the dashboard (its session cookie), in each environment
    (the pages read it from the query string: :func:`paths` adds it)."""
    found = []
    for owner in world.owners:
        r = httpx.post(
            f"{world.server.url}/owners/me/dashboard-link",
            headers={"Authorization": f"Bearer {owner.jwt}"},
        )
        assert r.status_code == 201, r.text
        signed = httpx.get(r.json()["url"])
        assert signed.status_code == 303, signed.text
        cookie = {"Cookie": f"svc_dashboard={signed.cookies['svc_dashboard']}"}
        for env in ENVIRONMENTS:
            label = f"{owner.name}:dashboard:{env}"
            found.append(Caller(label, "dashboard", cookie, f"owner:{owner.id}", env))
    return found


def objects(world: World) -> dict[str, list[str]]:
    """Each path parameter's values: every owner's object of that kind, in both
    environments (a caller's own first, where the call takes one)."""
    server = world.server
    values: dict[str, list[str]] = {
        "resource_id": [],
        "seller_id": [],
        "key_id": [],
        "webhook_id": [],
        "short_id": [],
        "destination": [],
    }
    for owner in world.owners:
        values["destination"].append(f"@{owner.handle}")
        for (_env, kind), seller in owner.sellers.items():
            values["seller_id"].append(seller.id)
            if kind == "deposit":
                for label in ("report", "retired"):
                    values["resource_id"].append(seller.resources[label]["id"])
                values["short_id"].append(seller.resources["report"]["short_id"])
        values["key_id"] += [key.id for key in owner.wallet_keys.values()]
        values["webhook_id"] += list(owner.webhooks.values())
        values["webhook_id"] += [owner.listener] if owner.listener else []
    with server.ctx.db.read() as conn:
        values["delivery_id"] = list(
            conn.execute(select(t.webhook_deliveries.c.id).limit(6)).scalars()
        )
        values["withdrawal_id"] = list(conn.execute(select(t.withdrawals.c.id)).scalars())
        values["top_up_id"] = list(conn.execute(select(t.top_ups.c.id)).scalars())
        values["refund_id"] = list(conn.execute(select(t.refunds.c.id)).scalars())
        values["approval_id"] = list(conn.execute(select(t.approvals.c.id)).scalars())
        receipts = conn.execute(
            select(t.receipts.c.id, t.receipts.c.tx_hash).where(t.receipts.c.tx_hash.is_not(None))
        ).all()
    values["tx_hash"] = [r.tx_hash for r in receipts[:3]]
    # One of each shape: the path names a receipt for every credential of the world.
    values["receipt_id"] = receipts_of_world(world, per_shape=1)
    values["address"] = ["0x000000000000000000000000000000000000dEaD"]
    values["token"] = ["not-a-link-token"]
    return values


def receipts_of_world(world: World, per_shape: int = 2) -> list[str]:
    """``per_shape`` receipts of each kind, rail, status (a metered one held or captured)
    and environment, paid by a wallet key or not, selling a seller's resource or not:
    every shape of receipt, every owner's among them."""
    with world.server.ctx.db.read() as conn:
        r = t.receipts.c
        rows = conn.execute(
            select(r.id, r.kind, r.rail, r.status, r.environment, r.seller_id, r.wallet_key_id)
        ).all()
    picked: dict[tuple[Any, ...], list[str]] = {}
    for row in rows:
        shape = (
            row.kind,
            row.rail,
            row.status,
            row.environment,
            row.seller_id is None,
            row.wallet_key_id is None,
        )
        side = picked.setdefault(shape, [])
        if len(side) < per_shape:
            side.append(row.id)
    return [receipt for side in picked.values() for receipt in side]


def paths(ep: Endpoint, values: dict[str, list[str]]) -> Iterator[str]:
    """The route's path with every combination of its parameters' values (the payments
    page of the dashboard: with each seller's id in its query too)."""
    names = re.findall(r"{(\w+)}", ep.path)
    for combo in itertools.product(*(values[name] for name in names)):
        path = ep.path
        for name, value in zip(names, combo, strict=True):
            path = path.replace("{" + name + "}", value)
        yield path
    if ep.path == "/dashboard/payments":
        for seller in values["seller_id"]:
            yield f"{ep.path}?seller={seller}"


def bodies(ep: Endpoint, world: World, values: dict[str, list[str]]) -> Iterator[Any]:
    """The route's example body, and the same naming every owner's objects in the fields
    that name one."""
    body = None if ep.body_class is None else example_of(ep.body_class)
    if body is None:
        yield {} if ep.method in ("POST", "PATCH", "PUT") else None
        return
    if "url" not in body:  # the example's URL is on the internet: never called
        yield body
    swaps = {
        "resource_id": values["resource_id"],
        "receipt_id": receipts_of_world(world),
        "destination": values["destination"],
        "url": [world.server.url + "/g/" + s for s in values["short_id"]],
    }
    for field, choices in swaps.items():
        if field in body:
            for choice in choices:
                yield {**body, field: choice}


def calls(world: World) -> tuple[list[Call], list[Call]]:
    values = objects(world)
    everyone = callers(world)
    signed_in = dashboard_callers(world)
    # A public route reads no credential: nobody, and one caller of each role, suffice.
    one_of_each = [next(c for c in everyone if c.role == role) for role in (None, *ROLES)]
    safe: list[Call] = []
    last: list[Call] = []
    for ep in served():
        who = everyone if ep.role is not None else one_of_each
        if ep.page and ep.path.startswith("/dashboard") and "{token}" not in ep.path:
            who = [one_of_each[0], *signed_in]  # the pages read the session cookie only
        for caller, path, body in itertools.product(
            who, list(paths(ep, values)), list(bodies(ep, world, values))
        ):
            if caller.role is None and ep.role is not None:
                continue  # 401 for everyone: the auth matrix's subject
            if (
                ep.role is not None
                and caller.role not in ep.roles
                and not isinstance(ep.auth, OptionalAuth)
            ):
                continue  # 403 for everyone: the auth matrix's subject
            call = Call(caller, ep, path, body)
            (last if DESTRUCTIVE.search(ep.path) or ep.method == "DELETE" else safe).append(call)
    return safe, last


def run(http: httpx.Client, call: Call) -> httpx.Response:
    """One call on the shared client (a client per call would build an SSL context each
    time: most of the test's time went there)."""
    headers = {**call.caller.headers, "Idempotency-Key": str(uuid.uuid4())}
    path = call.path
    if call.caller.role == "dashboard":
        path += ("&" if "?" in path else "?") + f"environment={call.caller.environment}"
    return http.request(call.endpoint.method, path, json=call.body, headers=headers)


def _events_of_caller(oracle: Oracle, call: Call, answer: httpx.Response) -> set[str]:
    """A listener's poll (``svc listen``) answers webhook bodies: the ids inside an event
    addressed to the caller are what its webhooks carry (a payment names its payer's key).
    The event itself must be the caller's, which the oracle still checks."""
    if not call.path.endswith("/listen") or answer.status_code != 200:
        return set()
    inside: set[str] = set()
    for delivery in answer.json().get("data", []):
        whose = oracle.whose(delivery["event_id"])
        if whose is not None and call.caller.party in whose.parties:
            inside |= ids_in(delivery["body"]) - {delivery["event_id"]}
    return inside


def strangers(oracle: Oracle, call: Call, answer: httpx.Response) -> list[str]:
    """The ids in ``answer`` that are not the caller's.  The ids the caller named itself
    (path, body) are its own words echoed (``POST /access/verify`` answers the receipt id
    it was asked about, ``valid: false`` when it is another seller's); an answer that
    issues an owner's credential (sign-up) speaks to that owner."""
    text = answer.text + " " + " ".join(answer.headers.get(h, "") for h in NAMING_HEADERS)
    named = ids_in(f"{call.path} {json.dumps(call.body)}")
    party = call.caller.party
    if answer.headers.get("content-type", "").startswith("application/json"):
        issued = answer.json()
        if isinstance(issued, dict) and "owner_jwt" in issued:
            party = f"owner:{issued['owner_id']}"
    found = []
    for object_id in sorted(ids_in(text) - named - _events_of_caller(oracle, call, answer)):
        whose = oracle.whose(object_id)
        if whose is None:
            found.append(f"{object_id} (unknown)")
        elif whose.parties == PUBLIC:
            continue
        elif party not in whose.parties:
            found.append(f"{object_id} (of {sorted(whose.parties)})")
        elif whose.environment not in (None, call.caller.environment):
            found.append(f"{object_id} (of {whose.environment})")
    return found


@pytest.mark.timeout(1800)
def test_no_answer_names_another_tenants_object(world: World) -> None:
    safe, last = calls(world)
    oracle = Oracle(world.server)
    leaks: list[str] = []
    errors: list[str] = []

    http = httpx.Client(
        base_url=world.server.url, timeout=60, limits=httpx.Limits(max_connections=8)
    )

    def check(call: Call) -> None:
        answer = run(http, call)
        where = f"{call.caller.label} {call.endpoint.method} {call.path} {call.body}"
        if answer.status_code == 500:
            errors.append(f"{where}: {answer.status_code} {answer.text[:200]}")
        found = strangers(oracle, call, answer)
        if found:
            leaks.append(f"{where} -> {answer.status_code}: {found}")

    with http, ThreadPoolExecutor(8) as pool:
        list(pool.map(check, safe))
        for call in last:
            check(call)
    assert len(safe) + len(last) > 1000  # every route, every credential, every object
    assert errors == [], "\n".join(errors[:20])
    assert leaks == [], f"{len(leaks)} answers name another tenant's objects:\n" + "\n".join(
        leaks[:40]
    )

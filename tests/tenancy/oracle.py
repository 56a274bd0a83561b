"""Whose is an id?  The database answers, for the ownership tests.

Every object id (``<prefix>_<26 chars>``) is mapped to its *parties*, the credentials it
belongs to, written ``owner:own_…``, ``seller:sel_…`` and ``key:vw_…``, and its
environment.  An owner's objects are also its sellers' and wallet keys' (a seller key may
see its owner's id); a payment's receipt belongs to both sides of it: the seller paid and
the payer (the wallet key that paid, or the owner a handle payment reached).  Resources
are public: every gate's 402 names its resource.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from sqlalchemy import select

from reference_server.store import tables as t

from ..support import LiveServer

PUBLIC = frozenset({"public"})
#: An object id anywhere in an answer's text.
ID = re.compile(
    r"\b(?:own|sel|sk|res|vw|hdl|rcpt|tr|acct|evt|we|dlv|att|clm|pa|wd|sbacct|sbpo|tu|rfnd|appr)"
    r"_[0-9a-z]{26}\b"
)


@attrs.frozen
class Whose:
    parties: frozenset[str]
    #: ``None``: both (an owner is one in either environment).
    environment: str | None


def ids_in(text: str) -> set[str]:
    return set(ID.findall(text))


class Oracle:
    """The parties of every id in the world's database, read again when an answer names
    one it does not know yet (the request may have made it)."""

    def __init__(self, live: LiveServer) -> None:
        self.live = live
        self.lock = threading.Lock()
        with live.ctx.db.read() as conn:
            self.known: dict[str, Whose] = dict(_index(conn))

    def whose(self, object_id: str) -> Whose | None:
        """Read after the answer came: what the request made is committed by then.  One
        reader at a time, so a slower, older read never replaces a newer one."""
        with self.lock:
            if object_id not in self.known:
                with self.live.ctx.db.read() as conn:
                    self.known = dict(_index(conn))
            return self.known.get(object_id)


def _rows(conn: Any, *columns: Any) -> Iterable[Any]:
    return conn.execute(select(*columns)).all()


class _Parties:
    """Who an owner, a seller or a wallet key id stands for."""

    def __init__(self, conn: Any) -> None:
        self.sellers = {r.id: r.owner_id for r in _rows(conn, t.sellers.c.id, t.sellers.c.owner_id)}
        self.keys = {
            r.id: r.owner_id for r in _rows(conn, t.wallet_keys.c.id, t.wallet_keys.c.owner_id)
        }
        self.of_owner: dict[str, set[str]] = {}
        for seller_id, owner_id in self.sellers.items():
            self.of_owner.setdefault(owner_id, set()).add(f"seller:{seller_id}")
        for key_id, owner_id in self.keys.items():
            self.of_owner.setdefault(owner_id, set()).add(f"key:{key_id}")

    def owner(self, owner_id: str | None) -> set[str]:
        return set() if owner_id is None else {f"owner:{owner_id}"}

    def whole_owner(self, owner_id: str) -> set[str]:
        """An owner's own id: also its sellers' and wallet keys'."""
        return {f"owner:{owner_id}", *self.of_owner.get(owner_id, ())}

    def seller(self, seller_id: str | None) -> set[str]:
        if seller_id not in self.sellers:
            return set()
        return {f"seller:{seller_id}", *self.owner(self.sellers[seller_id])}

    def key(self, key_id: str | None) -> set[str]:
        if key_id not in self.keys:
            return set()
        return {f"key:{key_id}", *self.owner(self.keys[key_id])}

    def ref(self, ref_id: str) -> set[str]:
        """A ledger account's holder: a seller, a wallet key or an owner (its wallet)."""
        whole = self.whole_owner(ref_id) if ref_id in self.of_owner else set()
        return {*self.seller(ref_id), *self.key(ref_id), *whole}


def _index(conn: Any) -> Iterator[tuple[str, Whose]]:
    """Every id's parties, read from one snapshot: under PostgreSQL's read committed, a
    seller committed between two of these reads would have no owner."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    p = _Parties(conn)
    yield from _accounts_of_people(conn, p)
    receipts = dict(_receipts(conn, p))
    yield from ((rid, Whose(parties, env)) for rid, (parties, env) in receipts.items())
    yield from _ledger(conn, p, {rid: parties for rid, (parties, _) in receipts.items()})
    yield from _webhooks(conn, p)
    yield from _payouts(conn, p)


def _accounts_of_people(conn: Any, p: _Parties) -> Iterator[tuple[str, Whose]]:
    for r in _rows(conn, t.owners.c.id):
        yield r.id, Whose(frozenset(p.whole_owner(r.id)), None)
    for r in _rows(conn, t.sellers.c.id, t.sellers.c.environment):
        yield r.id, Whose(frozenset(p.seller(r.id)), r.environment)
    sk = t.seller_keys.c
    for r in _rows(conn, sk.id, sk.seller_id, sk.environment):
        yield r.id, Whose(frozenset(p.seller(r.seller_id)), r.environment)
    for r in _rows(conn, t.resources.c.id):
        yield r.id, Whose(PUBLIC, None)
    for r in _rows(conn, t.wallet_keys.c.id, t.wallet_keys.c.environment):
        yield r.id, Whose(frozenset(p.key(r.id)), r.environment)
    for r in _rows(conn, t.handles.c.id, t.handles.c.owner_id, t.handles.c.environment):
        yield r.id, Whose(frozenset(p.owner(r.owner_id)), r.environment)
    sa = t.spend_attempts.c
    for r in _rows(conn, sa.id, sa.wallet_key_id, sa.environment):
        yield r.id, Whose(frozenset(p.key(r.wallet_key_id)), r.environment)
    ap = t.approvals.c
    for r in _rows(conn, ap.id, ap.wallet_key_id, ap.environment):
        yield r.id, Whose(frozenset(p.key(r.wallet_key_id)), r.environment)
    tu = t.top_ups.c
    for r in _rows(conn, tu.id, tu.owner_id, tu.environment):
        yield r.id, Whose(frozenset(p.owner(r.owner_id)), r.environment)


def _receipts(conn: Any, p: _Parties) -> Iterator[tuple[str, tuple[frozenset[str], str]]]:
    """Both sides of each payment: the seller (or the owner a handle payment reached)
    and the payer (the wallet key, or the one whose pay-url paid the transaction)."""
    payers = _payers_by_transaction(conn)
    rc = t.receipts.c
    columns = (rc.id, rc.seller_id, rc.wallet_key_id, rc.destination_owner_id, rc.tx_hash)
    for r in _rows(conn, *columns, rc.environment):
        paid_by = payers.get((r.tx_hash or "").lower(), set())
        parties = {
            *p.seller(r.seller_id),
            *p.key(r.wallet_key_id),
            *p.owner(r.destination_owner_id),
            *(party for key_id in paid_by for party in p.key(key_id)),
        }
        yield r.id, (frozenset(parties), r.environment)


def _ledger(
    conn: Any, p: _Parties, receipts: dict[str, frozenset[str]]
) -> Iterator[tuple[str, Whose]]:
    accounts = {}
    ac = t.ledger_accounts.c
    for r in _rows(conn, ac.id, ac.ref_id, ac.environment):
        accounts[r.id] = frozenset(p.ref(r.ref_id))
        yield r.id, Whose(accounts[r.id], r.environment)
    tc = t.ledger_transfers.c
    columns = (tc.id, tc.debit_account_id, tc.credit_account_id, tc.receipt_id, tc.wallet_key_id)
    for r in _rows(conn, *columns, tc.environment):
        parties = {
            *accounts.get(r.debit_account_id, ()),
            *accounts.get(r.credit_account_id, ()),
            *receipts.get(r.receipt_id, ()),
            *p.key(r.wallet_key_id),
        }
        yield r.id, Whose(frozenset(parties), r.environment)


def _webhooks(conn: Any, p: _Parties) -> Iterator[tuple[str, Whose]]:
    for r in _rows(conn, t.events.c.id, t.events.c.owner_id, t.events.c.environment):
        yield r.id, Whose(frozenset(p.owner(r.owner_id)), r.environment)
    endpoints = {}
    ec = t.webhook_endpoints.c
    for r in _rows(conn, ec.id, ec.owner_id, ec.environment):
        endpoints[r.id] = Whose(frozenset(p.owner(r.owner_id)), r.environment)
        yield r.id, endpoints[r.id]
    for r in _rows(conn, t.webhook_deliveries.c.id, t.webhook_deliveries.c.endpoint_id):
        yield r.id, endpoints[r.endpoint_id]


def _payouts(conn: Any, p: _Parties) -> Iterator[tuple[str, Whose]]:
    """Payout accounts, withdrawals and refunds, with the sandbox processor's ids for
    them, and the open-rail claims held for a seller."""
    pc = t.payout_accounts.c
    for r in _rows(conn, pc.id, pc.seller_id, pc.processor_account_id, pc.environment):
        whose = Whose(frozenset(p.seller(r.seller_id)), r.environment)
        yield from ((i, whose) for i in (r.id, r.processor_account_id) if i)
    fc = t.refunds.c
    for r in _rows(conn, fc.id, fc.seller_id, fc.wallet_key_id, fc.environment):
        # the seller's; its payer learns it from payment.refunded
        yield (
            r.id,
            Whose(frozenset({*p.seller(r.seller_id), *p.key(r.wallet_key_id)}), r.environment),
        )
    wc = t.withdrawals.c
    for r in _rows(conn, wc.id, wc.seller_id, wc.processor_payout_id, wc.environment):
        whose = Whose(frozenset(p.seller(r.seller_id)), r.environment)
        yield from ((i, whose) for i in (r.id, r.processor_payout_id) if i)
    for r in _rows(conn, t.rail_claims.c.key, t.rail_claims.c.value):
        hold = _hold(r.key, r.value)
        if hold is not None:
            yield hold["claim"], Whose(frozenset(p.seller(hold["seller_id"])), hold["environment"])


def _payers_by_transaction(conn: Any) -> dict[str, set[str]]:
    """The wallet keys whose pay-url paid each transaction: the payer side of the
    seller's receipt for it."""
    found: dict[str, set[str]] = {}
    sc = t.spend_attempts.c
    for r in _rows(conn, sc.tx_hash, sc.wallet_key_id):
        if r.tx_hash:
            found.setdefault(r.tx_hash.lower(), set()).add(r.wallet_key_id)
    return found


def _hold(key: str, value: str) -> dict[str, Any] | None:
    if not key.startswith(("hold:", "settled:")):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict) or "seller_id" not in data:
        return None
    return {
        "claim": key.split(":", 1)[1],
        "seller_id": data["seller_id"],
        "environment": data.get("environment"),
    }

"""Ledger payments (``POST /pay``) and the receipts they leave.

A resource payment is one transaction that: locks the wallet key and checks its policy,
then books the sale (:func:`book_sale`, shared with the open rails): moves the price from
the wallet key to the seller's balance, moves the platform fee from the seller's balance
to the platform, writes a receipt, and records ``payment.succeeded`` for the seller's
owner.  A handle payment moves money from the wallet key to the owner's
account wallet behind the handle and records ``transfer.received``.  Either everything is
written or nothing is.

A group of one wallet key's concurrent ``POST /pay`` (``web.strategies.Grouped``) is
decided by :func:`pay_resources`, a second booking of resource sales kept as a measured
optimisation: it reads, locks and writes a whole group in a few statements where
:func:`pay_resource` on each call takes about 14 per payment.  Without it (measured
2026-11-27 on the 2-core machine, ``bench/pay_throughput.py``, ratio to the one-row
commit) PostgreSQL fell from 1.03 to 0.40 at 8 clients and from 2.26 to 0.57 at 32, and
even with the single path's statements trimmed to the bone it read 0.25-0.44 against
0.52-1.49; figures in docs/performance.md.  Fees, policy and events that change here
change in :func:`pay_resources` too (tests/money/test_group_commit.py holds them equal).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection, Row, and_, bindparam, insert, select, update

from svc import PayResult, ReceiptVerification, ResourceMetadata
from svc.money import format_micros, from_micros
from svc.wire import structure, unstructure

from ..ids import new_id
from ..invariant import InvariantError
from ..store import tables as t
from ..timeutil import as_utc
from . import ledger, wallets
from .errors import PaymentRefused
from .events import NewEvent, Outbox, record_event
from .webhook_endpoints import any_enabled, matching_endpoints

__all__ = [
    "OnChain",
    "Purchase",
    "SellerRef",
    "book_sale",
    "fee_for",
    "pay_handle",
    "pay_resource",
    "pay_resources",
    "payable_resource",
    "record_refusal",
    "verify_receipt",
]

_r = t.receipts
_transfers = t.ledger_transfers
#: ``pay_resource``'s look-up of the seller, built once.
_SELLER = select(t.sellers).where(t.sellers.c.id == bindparam("seller_id"))
#: An open-rail transaction hash, accepted in place of the receipt id it was booked as.
_TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")


def fee_for(amount: int, fee_bps: int) -> int:
    """The platform fee in micro-units, rounded down (the seller never pays a fraction)."""
    return amount * fee_bps // 10_000


@attrs.frozen(kw_only=True)
class OnChain:
    """Where an open-rail sale settled: the transaction, its signer, its network."""

    tx_hash: str
    payer: str | None
    network: str


def book_sale(
    conn: Connection,
    *,
    resource: Row[Any],
    seller: Row[Any],
    rail: str,
    settlement: str,
    amount: int,
    debit: str | None,
    fee_bps: int,
    request_id: str,
    now: datetime,
    wallet_key_id: str | None = None,
    on_chain: OnChain | None = None,
    event_extra: dict[str, Any] | None = None,
    receipt_id: str | None = None,
    before_locks: Callable[[], object] | None = None,
    captured_units: int | None = None,
) -> str:
    """One sale of ``resource`` in the books, whatever rail paid it; returns the receipt id.

    ``debit`` is the account the price comes from (the payer's wallet key for the ledger
    rail, ``chain_deposits`` for tokens that reached the service's deposit address): the
    price goes to the seller's balance and the platform fee from there to the platform.
    ``debit=None`` is ``direct_wallet``: the tokens went to the seller's own wallet and
    nothing is credited here (no transfer, no fee).  Then the receipt and
    ``payment.succeeded`` for the seller's owner.  Raises :class:`ledger.InsufficientFunds`
    when ``debit`` cannot pay (the caller's savepoint drops what was written).

    The rows no one else touches (transfers, receipt) are written and the webhook
    endpoints read first; ``before_locks`` (the payer's policy, which locks its wallet
    key) runs next, and the balances, the rows every sale of this payer or seller locks,
    move last, so each lock is held from there to the commit only.

    ``captured_units``: the sale captures a metered authorization (``metered.capture``):
    its receipt exists, ``authorized``, and is settled here instead of written.
    """
    env = resource.environment
    receipt_id = receipt_id or new_id("rcpt")  # an open-rail hold reserved its id
    transfer_id: str | None = None
    fee = 0
    accounts: list[str] = []
    if debit is not None:
        # The seller's account and a platform-fee shard, in one statement.
        fee_ref = ledger.platform_shard()
        accounts = ledger.find_accounts(
            conn,
            environment=env,
            named=[(ledger.SELLER_BALANCE, seller.id), (ledger.PLATFORM_FEES, fee_ref)],
            now=now,
        )
        fee = fee_for(amount, fee_bps)
        refs = {"receipt_id": receipt_id, "reference": resource.id}
        rows = ledger.sale_transfer_rows(
            environment=env,
            debit=debit,
            seller=accounts[0],
            fees=accounts[1],
            amount=amount,
            fee=fee,
            now=now,
            payment_refs={**refs, "wallet_key_id": wallet_key_id},
            fee_refs=refs,
        )
        transfer_id = ledger.record_sale(conn, rows)
    sale = _SaleRows(
        resource=resource,
        seller=seller,
        rail=rail,
        settlement=settlement,
        amount=amount,
        fee=fee,
        request_id=request_id,
        now=now,
        receipt_id=receipt_id,
        transfer_id=transfer_id,
        wallet_key_id=wallet_key_id,
        on_chain=on_chain,
    )
    if captured_units is None:
        # the row as parameters: one cached statement, not one built per sale
        conn.execute(insert(_r), sale.receipt())
    else:
        conn.execute(
            update(_r)
            .where(_r.c.id == receipt_id)
            .values(
                status="settled",
                amount_micros=amount,
                fee_micros=fee,
                transfer_id=transfer_id,
                units=captured_units,
                settled_at=now,
            )
        )
    endpoints = matching_endpoints(
        conn, owner_id=seller.owner_id, environment=env, event_type="payment.succeeded"
    )
    # The event's body is built before the locks too: only the seller's balance after
    # the sale waits for them.
    data = sale.event_data(event_extra)
    if before_locks is not None:
        before_locks()
    if debit is not None:
        seller_balance = ledger.move_sale(
            conn, debit=debit, seller=accounts[0], fees=accounts[1], amount=amount, fee=fee
        )
    else:  # direct_wallet: no transfer here
        seller_balance = ledger.balance_micros(
            conn, environment=env, kind=ledger.SELLER_BALANCE, ref_id=seller.id
        )
    data["seller_balance"] = format_micros(seller_balance)
    record_event(
        conn,
        owner_id=seller.owner_id,
        environment=env,
        type="payment.succeeded",
        data=data,
        now=now,
        endpoints=endpoints,
    )
    return receipt_id


@attrs.frozen(kw_only=True)
class _SaleRows:
    """What one sale writes besides its transfers: its receipt's row and the body of its
    ``payment.succeeded`` (one sale, :func:`book_sale`, or a group, :func:`pay_resources`)."""

    resource: Row[Any]
    #: The seller's row, or what a group read of it (:class:`SellerRef`).
    seller: Any
    rail: str
    settlement: str
    amount: int
    fee: int
    request_id: str
    now: datetime
    receipt_id: str
    transfer_id: str | None
    wallet_key_id: str | None
    on_chain: OnChain | None = None

    def receipt(self) -> dict[str, Any]:
        on_chain = self.on_chain
        return {
            "id": self.receipt_id,
            "environment": self.resource.environment,
            "kind": "resource",
            "rail": self.rail,
            "settlement": self.settlement,
            "amount_micros": self.amount,
            "fee_micros": self.fee,
            "resource_id": self.resource.id,
            "seller_id": self.seller.id,
            "wallet_key_id": self.wallet_key_id,
            "transfer_id": self.transfer_id,
            "tx_hash": None if on_chain is None else on_chain.tx_hash,
            "payer": None if on_chain is None else on_chain.payer,
            "network": None if on_chain is None else on_chain.network,
            "metadata": dict(self.resource.metadata),
            "request_id": self.request_id,
            "created_at": self.now,
        }

    def event_data(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """``payment.succeeded``'s body, but ``seller_balance`` (known once the sale
        moved it)."""
        resource, on_chain = self.resource, self.on_chain
        return {
            "ok": True,
            "type": "resource",
            "rail": self.rail,
            "receipt_id": self.receipt_id,
            "request_id": self.request_id,
            "resource_id": resource.id,
            "short_id": resource.short_id,
            "path_or_tool": resource.path if resource.kind == "http" else resource.tool,
            "metadata": unstructure(structure(dict(resource.metadata), ResourceMetadata)),
            "seller_id": self.seller.id,
            "amount": format_micros(self.amount),
            "platform_fee": format_micros(self.fee),
            "processor_payment_intent_id": None if on_chain is None else on_chain.tx_hash,
            "seller_balance": None,
            "environment": resource.environment,
            "settlement": self.settlement,
            **(extra or {}),
        }


def pay_resource(
    conn: Connection,
    *,
    wallet_key_id: str,
    resource: Row[Any],
    fee_bps: int,
    request_id: str,
    now: datetime,
    answer_ahead: Callable[[PayResult], object] | None = None,
) -> PayResult:
    """``POST /pay {"resource_id"}``: the ledger rail, from the wallet key's balance.

    The answer is known before any lock is taken (the receipt's id is made here):
    ``answer_ahead`` gets it right before the wallet key is locked, for the caller to
    record it then (its idempotent answer) rather than under the locks."""
    amount = int(resource.amount_micros)
    receipt_id = new_id("rcpt")
    result = _ledger_result(receipt_id, amount, resource.id)
    # Read what needs no lock first: from the key's row lock (``charge``) to the commit,
    # the payments of one wallet key run one at a time, so that stretch is kept short.
    seller = conn.execute(_SELLER, {"seller_id": resource.seller_id}).one()
    debit = ledger.account_id(
        conn, environment=resource.environment, kind=ledger.WALLET_KEY, ref_id=wallet_key_id
    )
    if debit is None:
        raise InvariantError("every wallet key has an account")
    charged: list[Row[Any]] = []

    def charge() -> None:
        if answer_ahead is not None:
            answer_ahead(result)
        key = wallets.charge(conn, wallet_key_id, amount, rail="rill", host=None, now=now)
        if key.environment != resource.environment:
            raise InvariantError("a wallet key pays in its own environment")
        charged.append(key)

    try:
        book_sale(
            conn,
            resource=resource,
            seller=seller,
            rail="rill",
            settlement="ledger",
            amount=amount,
            debit=debit,
            fee_bps=fee_bps,
            request_id=request_id,
            now=now,
            wallet_key_id=wallet_key_id,
            receipt_id=receipt_id,
            before_locks=charge,
        )
    except ledger.InsufficientFunds:
        raise wallets.insufficient_funds(conn, charged[0], amount) from None
    return result


def _ledger_result(receipt_id: str, amount: int, resource_id: str) -> PayResult:
    return PayResult(
        receipt_id=receipt_id,
        rail="rill",
        amount=from_micros(amount),
        resource_id=resource_id,
        settlement="ledger",
    )


@attrs.frozen
class SellerRef:
    """What a sale needs of its seller (a group reads it with the resource)."""

    id: str
    owner_id: str


def _payable() -> Any:
    r = t.resources
    query = select(
        r,
        t.sellers.c.owner_id.label("seller_owner_id"),
        any_enabled(t.sellers.c.owner_id, r.c.environment).label("seller_has_endpoints"),
    ).join(t.sellers, t.sellers.c.id == r.c.seller_id)
    # The accounts a sale moves: the wallet key's, the fee shard's, the seller's balance.
    for name, kind, ref_id in (
        ("payer_account", ledger.WALLET_KEY, bindparam("wallet_key_id")),
        ("fee_account", ledger.PLATFORM_FEES, bindparam("fee_ref")),
        ("seller_account", ledger.SELLER_BALANCE, r.c.seller_id),
    ):
        a = t.ledger_accounts.alias(name)
        query = query.add_columns(*ledger.balance_columns(a, f"{name}_")).outerjoin(
            a, and_(a.c.environment == r.c.environment, a.c.kind == kind, a.c.ref_id == ref_id)
        )
    return query.where(
        r.c.id == bindparam("resource_id"), r.c.environment == bindparam("environment")
    )


#: ``POST /pay``'s read of a resource, built once (every payment runs it), with what
#: paying it needs besides: its seller's owner, whether that owner has a webhook
#: endpoint, and the sale's accounts with their balances (``None`` where not opened
#: yet).  A group of payments needs no look-up of the seller then, nor of the endpoints
#: when there are none, nor of the accounts (one statement each).
_PAYABLE = _payable()


def payable_resource(
    conn: Connection, resource_id: str, environment: str, *, wallet_key_id: str, fee_ref: str
) -> Row[Any] | None:
    """The resource as :func:`pay_resources` pays it (:data:`_PAYABLE`), or ``None``."""
    params = {
        "resource_id": resource_id,
        "environment": environment,
        "wallet_key_id": wallet_key_id,
        "fee_ref": fee_ref,
    }
    return conn.execute(_PAYABLE, params).first()


@attrs.frozen(kw_only=True)
class Purchase:
    """One ``POST /pay {"resource_id"}`` of a group (:func:`pay_resources`); its
    resource is a row of :func:`payable_resource`."""

    resource: Row[Any]
    request_id: str
    now: datetime


def pay_resources(
    conn: Connection,
    *,
    wallet_key_id: str,
    purchases: list[Purchase],
    fee_bps: int,
    fee_ref: str,
) -> list[PayResult | PaymentRefused] | None:
    """Several ``POST /pay {"resource_id"}`` of one wallet key in one transaction (a
    group commit), each decided in order exactly as :func:`pay_resource` decides one and
    writing the same rows; a refused one writes nothing and is answered with its
    :class:`PaymentRefused`.  Reads, locks and writes are one statement each, whatever
    the group's size; the balances decided in Python are exact because the rows stay
    locked from that read to the commit.

    ``None``, with nothing written: a case for :func:`pay_resource`, one by one (a
    period reset is due, or the key is no longer active)."""
    env = purchases[0].resource.environment
    if any(purchase.resource.environment != env for purchase in purchases):
        raise InvariantError("a wallet key pays in its own environment")
    books = _GroupBooks(
        wallet_key_id=wallet_key_id,
        fee_bps=fee_bps,
        environment=env,
        fee_ref=fee_ref,
    )
    books.read(conn, purchases)
    # The key's lock first, as ``wallets.charge`` takes it, then the accounts in id
    # order.  As ``charge`` does, the lock is taken by counting the spend (the whole
    # group's: the usual case) and the policy checked against the counts before it;
    # what was refused is uncounted after.
    total = sum(int(purchase.resource.amount_micros) for purchase in purchases)
    key = books.count_and_lock(conn, total)
    spent_period = int(key.spent_period_micros) - total
    spent_total = int(key.spent_total_micros) - total
    if (
        key.status != "active"
        or key.environment != env
        or not all(wallets.period_is_current(key, purchase.now) for purchase in purchases)
    ):
        wallets.count_spend(conn, wallet_key_id, -total)
        return None
    counted = spent_total
    answers: list[PayResult | PaymentRefused] = []
    for purchase in purchases:
        amount = int(purchase.resource.amount_micros)
        try:
            wallets.check_policy(
                key,
                amount,
                rail="rill",
                host=None,
                now=purchase.now,
                spent_period=spent_period,
                spent_total=spent_total,
            )
            books.check_funds(amount)
        except PaymentRefused as refused:
            answers.append(refused)
            continue
        spent_period, spent_total = spent_period + amount, spent_total + amount
        answers.append(books.sale(purchase, amount))
    if counted + total != spent_total:  # refused ones: uncount them
        wallets.count_spend(conn, wallet_key_id, spent_total - counted - total)
    books.write(conn)
    return answers


@attrs.define(kw_only=True)
class _GroupBooks:
    """A group's sales (:func:`pay_resources`): read once, decided in order against
    the balances read under lock, written at once."""

    wallet_key_id: str
    fee_bps: int
    environment: str
    #: The wallet key's account.
    debit: str = ""
    #: The group shares one fee shard: its accounts lock in one id order.
    fee_ref: str
    sellers: dict[str, Any] = attrs.Factory(dict)
    #: Seller id -> its balance account and the fee shard's.
    accounts: dict[str, list[str]] = attrs.Factory(dict)
    #: Seller owner id -> the endpoints subscribed to ``payment.succeeded``.
    endpoints: dict[str, list[str]] = attrs.Factory(dict)
    balances: dict[str, ledger.Balance] = attrs.Factory(dict)
    moves: dict[str, int] = attrs.Factory(dict)
    transfers: list[dict[str, Any]] = attrs.Factory(list)
    receipts: list[dict[str, Any]] = attrs.Factory(list)
    events: list[NewEvent] = attrs.Factory(list)

    def read(self, conn: Connection, purchases: list[Purchase]) -> None:
        """What needs no lock: the sellers, the accounts and the endpoints, each read once
        (the sellers and, where they are all there, the accounts with the resources)."""
        env = self.environment
        for purchase in purchases:
            seller_id, owner_id = purchase.resource.seller_id, purchase.resource.seller_owner_id
            if seller_id in self.sellers:
                continue
            self.sellers[seller_id] = SellerRef(seller_id, owner_id)
            if not purchase.resource.seller_has_endpoints:
                self.endpoints.setdefault(owner_id, [])
        named = [(ledger.WALLET_KEY, self.wallet_key_id), (ledger.PLATFORM_FEES, self.fee_ref)]
        named += [(ledger.SELLER_BALANCE, seller_id) for seller_id in self.sellers]
        known = self._read_with_resources(purchases)
        holds = ledger.reads_hold(conn)
        if all(name in known for name in named):
            self.debit, fees, *balances = [known[name][0] for name in named]
            if holds:
                self.balances = {account: balance for account, balance in known.values()}
        else:
            self.debit, fees, *balances = ledger.find_accounts(
                conn,
                environment=env,
                named=named,
                now=purchases[0].now,
                balances=self.balances if holds else None,
            )
        for seller_id, seller, balance in zip(
            self.sellers, self.sellers.values(), balances, strict=True
        ):
            self.accounts[seller_id] = [balance, fees]
            if seller.owner_id not in self.endpoints:
                self.endpoints[seller.owner_id] = matching_endpoints(
                    conn, owner_id=seller.owner_id, environment=env, event_type="payment.succeeded"
                )

    def _read_with_resources(
        self, purchases: list[Purchase]
    ) -> dict[tuple[str, str], tuple[str, ledger.Balance]]:
        """(kind, ref_id) -> the account and its balance, as the resources were read with
        them (:func:`payable_resource`)."""
        known = {}
        for purchase in purchases:
            row = purchase.resource
            refs = {
                "payer_account": (ledger.WALLET_KEY, self.wallet_key_id),
                "fee_account": (ledger.PLATFORM_FEES, self.fee_ref),
                "seller_account": (ledger.SELLER_BALANCE, row.seller_id),
            }
            for name, named in refs.items():
                account = getattr(row, f"{name}_id")
                if account is not None:
                    known[named] = (account, ledger.Balance.read(row, f"{name}_"))
        return known

    def count_and_lock(self, conn: Connection, total: int) -> Row[Any]:
        """Count ``total`` spent by the wallet key (which takes its row lock) and read the
        accounts' balances under their locks, taken after the key's; the key's row
        after.  SQLite's :meth:`read` read the balances already (they hold there)."""
        if self.balances:
            return wallets.count_spend(conn, self.wallet_key_id, total)
        accounts = [self.debit, *(a for pair in self.accounts.values() for a in pair)]
        key, self.balances = ledger.locked_balances_after(
            conn, wallets.counting_spend(self.wallet_key_id, total), accounts
        )
        return key

    def check_funds(self, amount: int) -> None:
        """Refuse as the debit's conditional ``UPDATE`` would (``ledger._debit``)."""
        payer = self.balances[self.debit]
        if not payer.allow_negative and payer.available < amount:
            raise wallets.insufficient_available(payer.available, amount)

    def sale(self, purchase: Purchase, amount: int) -> PayResult:
        """A paid purchase: its moves counted, its rows gathered."""
        resource = purchase.resource
        seller = self.sellers[resource.seller_id]
        seller_account, fee_account = self.accounts[resource.seller_id]
        fee = fee_for(amount, self.fee_bps)
        receipt_id = new_id("rcpt")
        refs = {"receipt_id": receipt_id, "reference": resource.id}
        rows = ledger.sale_transfer_rows(
            environment=self.environment,
            debit=self.debit,
            seller=seller_account,
            fees=fee_account,
            amount=amount,
            fee=fee,
            now=purchase.now,
            payment_refs={**refs, "wallet_key_id": self.wallet_key_id},
            fee_refs=refs,
        )
        self.transfers += rows
        for account, delta in ((self.debit, -amount), (seller_account, amount - fee)):
            self._move(account, delta)
        if fee:
            self._move(fee_account, fee)
        sale = _SaleRows(
            resource=resource,
            seller=seller,
            rail="rill",
            settlement="ledger",
            amount=amount,
            fee=fee,
            request_id=purchase.request_id,
            now=purchase.now,
            receipt_id=receipt_id,
            transfer_id=str(rows[0]["id"]),
            wallet_key_id=self.wallet_key_id,
        )
        self.receipts.append(sale.receipt())
        data = sale.event_data()
        data["seller_balance"] = format_micros(self.balances[seller_account].balance)
        self.events.append(
            NewEvent(
                owner_id=seller.owner_id,
                environment=self.environment,
                type="payment.succeeded",
                data=data,
                now=purchase.now,
                endpoints=self.endpoints[seller.owner_id],
            )
        )
        return _ledger_result(receipt_id, amount, resource.id)

    def _move(self, account: str, delta: int) -> None:
        self.moves[account] = self.moves.get(account, 0) + delta
        self.balances[account] = attrs.evolve(
            self.balances[account], balance=self.balances[account].balance + delta
        )

    def write(self, conn: Connection) -> None:
        """The group's writes, one statement each; nothing when nothing was paid."""
        if not self.transfers:
            return
        outbox = Outbox.of(self.events)
        rows = [(_transfers, self.transfers), (_r, self.receipts), *outbox.batches]
        ledger.move_balances(conn, self.moves, along=rows)
        outbox.written(conn)


def pay_handle(
    conn: Connection,
    *,
    wallet_key_id: str,
    handle: Row[Any],
    amount: int,
    request_id: str,
    now: datetime,
) -> PayResult:
    env = handle.environment
    key = wallets.charge(conn, wallet_key_id, amount, rail="rill", host=None, now=now)
    wallet_acct = wallets.wallet_account(conn, key)
    owner_acct = ledger.ensure_account(
        conn, environment=env, kind=ledger.OWNER_WALLET, ref_id=handle.owner_id, now=now
    )
    ledger.lock_accounts(conn, [wallet_acct, owner_acct])
    receipt_id = new_id("rcpt")
    try:
        transfer_id = ledger.transfer(
            conn,
            environment=env,
            debit=wallet_acct,
            credit=owner_acct,
            amount=amount,
            kind="handle_transfer",
            now=now,
            receipt_id=receipt_id,
            wallet_key_id=key.id,
            reference="@" + handle.handle,
        )
    except ledger.InsufficientFunds:
        raise wallets.insufficient_funds(conn, key, amount) from None
    conn.execute(
        insert(_r).values(
            id=receipt_id,
            environment=env,
            kind="transfer",
            rail="rill",
            settlement="ledger",
            amount_micros=amount,
            fee_micros=0,
            wallet_key_id=key.id,
            destination_owner_id=handle.owner_id,
            handle=handle.handle,
            transfer_id=transfer_id,
            request_id=request_id,
            created_at=now,
        )
    )
    record_event(
        conn,
        owner_id=handle.owner_id,
        environment=env,
        type="transfer.received",
        data={
            "receipt_id": receipt_id,
            "request_id": request_id,
            "destination": "@" + handle.handle,
            "amount": format_micros(amount),
            "rail": "rill",
            "settlement": "ledger",
            "environment": env,
            "account_wallet_balance": format_micros(
                ledger.balance_micros(
                    conn, environment=env, kind=ledger.OWNER_WALLET, ref_id=handle.owner_id
                )
            ),
        },
        now=now,
    )
    return PayResult(
        receipt_id=receipt_id,
        rail="rill",
        amount=from_micros(amount),
        destination="@" + handle.handle,
        settlement="ledger",
    )


def verify_receipt(
    conn: Connection,
    receipt_id: str,
    *,
    resource_id: str | None,
    seller_id: str | None,
) -> ReceiptVerification:
    """Is this a receipt for this resource (and this seller, when a seller asks)?

    An unknown receipt, or one for another resource or seller, is ``valid: false`` with a
    reason, never an error: gates call this on every request and must not leak which.

    An open-rail payment's transaction hash is an alias of its receipt (the spec's
    "alias of the upstream payment receipt"): the ``Payment-Receipt`` and
    ``PAYMENT-RESPONSE`` a paid gate answered with name the transaction, and unlock the
    gate again like the receipt id.  The answer names the receipt id either way.

    A metered ledger payment unlocks once: while ``authorized`` (the gate serves the
    answer, then captures it), not after it was captured or released.  A receipt refunded
    in full unlocks nothing (a partial refund leaves it valid).
    """
    row = _receipt_row(conn, receipt_id, resource_id)
    reason: str | None = None
    if row is None or row.kind != "resource":
        reason = "unknown receipt"
    elif resource_id is not None and row.resource_id != resource_id:
        reason = "receipt is for another resource"
    elif seller_id is not None and row.seller_id != seller_id:
        reason = "unknown receipt"
    elif row.rail == "rill" and row.max_amount_micros is not None:
        reason = _METERED_SPENT.get(row.status)
    if reason is None and row is not None and 0 < row.amount_micros <= row.refunded_micros:
        reason = "receipt refunded"  # the whole of it: it pays for nothing any more
    if reason is not None or row is None:
        return ReceiptVerification(valid=False, receipt_id=receipt_id, reason=reason)
    return ReceiptVerification(
        valid=True,
        receipt_id=row.id,
        resource_id=row.resource_id,
        amount=from_micros(row.amount_micros),
        rail=row.rail,
        metadata=structure(row.metadata or {}, ResourceMetadata),
        environment=row.environment,
        created_at=as_utc(row.created_at),
    )


#: Why a metered ledger receipt no longer unlocks, by its status (``authorized`` does).
_METERED_SPENT = {
    "settled": "metered receipt already captured (single use)",
    "released": "metered receipt was released (single use)",
}


def _receipt_row(conn: Connection, receipt_id: str, resource_id: str | None) -> Row[Any] | None:
    if not _TX_HASH.fullmatch(receipt_id):
        return conn.execute(select(_r).where(_r.c.id == receipt_id)).first()
    # A transaction hash is unique per environment; prefer the row for this resource.
    rows = conn.execute(
        select(_r).where(_r.c.tx_hash == receipt_id.lower(), _r.c.kind == "resource")
    ).all()
    return next((row for row in rows if row.resource_id == resource_id), None) or next(
        iter(rows), None
    )


def record_refusal(
    conn: Connection,
    refused: PaymentRefused,
    *,
    owner_id: str,
    environment: str,
    wallet_key_id: str,
    resource: Row[Any] | None,
    amount: int | None,
    request_id: str,
    now: datetime,
) -> None:
    """``payment.failed`` for the payer's owner: their agent tried to pay and was refused
    (funds, allowance, budget...).  Written after the attempt's own writes rolled back."""
    price = int(resource.amount_micros) if resource is not None else amount
    record_event(
        conn,
        owner_id=owner_id,
        environment=environment,
        type="payment.failed",
        data={
            "ok": False,
            "type": "resource" if resource is not None else "transfer",
            "rail": "rill",
            "reason": refused.code,
            "message": refused.message,
            "request_id": request_id,
            "attempt_id": None,
            "wallet_key_id": wallet_key_id,
            "resource_id": None if resource is None else resource.id,
            "short_id": None if resource is None else resource.short_id,
            "seller_id": None if resource is None else resource.seller_id,
            "amount": None if price is None else format_micros(price),
            "environment": environment,
            "settlement": "ledger",
        },
        now=now,
    )

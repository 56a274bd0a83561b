"""The sandbox chain's state and the changes to it: mint, transfer and cancel an authorization.

State is three tables (``store.tables.sandbox_*``): a balance per address, the EIP-3009
(and Permit2, :mod:`.permit2_chain`) nonces each authorizer has used, and a transaction
log.  The state changes are mint, ``transferWithAuthorization`` and
``cancelAuthorization`` (which spends a nonce and moves nothing: how ``pay-url`` makes sure
an authorization it handed out can never settle once it has decided that it did not).
``transferWithAuthorization`` follows the token's rules (USDC ``FiatTokenV2``), in its
order:

1. ``validAfter < now < validBefore`` (strictly, as ``block.timestamp`` is compared);
2. the nonce is unused for this authorizer;
3. the EIP-712 signature recovers to ``from``;
4. ``from`` holds at least ``value``; then the value moves and the nonce is spent.

Atomicity is the database's, the same way on SQLite and PostgreSQL, and within the
caller's transaction (so a later step can settle and credit a seller in one commit):

* the nonce is spent by inserting its ``(authorizer, nonce)`` primary key — of many
  concurrent settles of one authorization exactly one insert succeeds, the others wait
  for it and then fail (or proceed, if it rolled back);
* the debit is one conditional ``UPDATE … WHERE balance >= value``;
* debit and credit are issued in address order, so two opposite transfers cannot
  deadlock on PostgreSQL;
* all of it runs in a SAVEPOINT: a refused transfer leaves no trace (a reverted
  transaction spends no nonce) and leaves the caller's transaction usable.

A refusal raises :class:`ChainError` whose ``reason`` is the x402 ``exact`` EVM error code
the official SDK's facilitator reports for the same on-chain revert.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from datetime import datetime
from typing import Any

import attrs
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from ..invariant import InvariantError
from ..store import tables as t
from .eip3009 import Authorization, InvalidSignature, recover_signer, transaction_hash
from .token import SANDBOX_TOKEN

__all__ = [
    "INSUFFICIENT_BALANCE",
    "INVALID_SIGNATURE",
    "NONCE_USED",
    "PERMIT_WITNESS_TRANSFER",
    "VALID_AFTER",
    "VALID_BEFORE",
    "ZERO_ADDRESS",
    "ChainError",
    "Transaction",
    "audit",
    "balance_of",
    "cancel_authorization",
    "check_transfer",
    "mint",
    "move_once",
    "nonce_transaction",
    "transaction",
    "transfer_with_authorization",
]

#: x402 ``exact`` EVM error codes (as the official ``x402`` facilitator names them).
INVALID_SIGNATURE = "invalid_exact_evm_payload_signature"
VALID_AFTER = "invalid_exact_evm_payload_authorization_valid_after"
VALID_BEFORE = "invalid_exact_evm_payload_authorization_valid_before"
NONCE_USED = "invalid_exact_evm_nonce_already_used"
INSUFFICIENT_BALANCE = "invalid_exact_evm_insufficient_balance"

#: Mints come from the zero address, as an ERC-20 mint's ``Transfer`` event does.
ZERO_ADDRESS = "0x" + "0" * 40
MINT = "mint"
TRANSFER = "transferWithAuthorization"
CANCEL = "cancelAuthorization"
PERMIT_WITNESS_TRANSFER = "permitWitnessTransferFrom"
#: Balances are BIGINT; no balance can reach a value above this, so such a debit fails.
_MAX_BALANCE = 2**63 - 1

_b = t.sandbox_balances
_n = t.sandbox_nonces
_tx = t.sandbox_transactions


def _upsert_credit(insert: Any) -> Any:
    stmt = insert(_b)
    return stmt.on_conflict_do_update(
        index_elements=[_b.c.address],
        set_={
            "balance": _b.c.balance + stmt.excluded.balance,
            "updated_at": stmt.excluded.updated_at,
        },
    )


# Built once, parameters bound at execution: every payment the sandbox settles runs these
# (a statement built per call costs several times what executing it on SQLite does).
_BALANCE = select(_b.c.balance).where(_b.c.address == bindparam("address"))
_NONCE_TX = select(_n.c.tx_hash).where(
    _n.c.authorizer == bindparam("authorizer"), _n.c.nonce == bindparam("nonce")
)
_TRANSACTION = select(_tx).where(_tx.c.tx_hash == bindparam("tx_hash"))
_NONCE_SPENT_BY = (
    select(_n.c.tx_hash, _tx.c.kind, _tx.c.value)
    .select_from(_n.outerjoin(_tx, _tx.c.tx_hash == _n.c.tx_hash))
    .where(_n.c.authorizer == bindparam("authorizer"), _n.c.nonce == bindparam("nonce"))
)
_DEBIT = (
    update(_b)
    .where(_b.c.address == bindparam("debited"), _b.c.balance >= bindparam("value"))
    .values(balance=_b.c.balance - bindparam("value"), updated_at=bindparam("now"))
)
#: Add to a balance, creating the row on first use (by dialect: is it PostgreSQL?).
_CREDIT = {False: _upsert_credit(sqlite.insert), True: _upsert_credit(postgresql.insert)}
_INSERT_TX = insert(_tx)


class ChainError(Exception):
    """The token would revert: nothing was written.  ``reason`` is the x402 error code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@attrs.frozen(kw_only=True)
class Transaction:
    hash: str
    kind: str
    from_address: str
    to: str
    value: int
    block_number: int
    timestamp: int
    nonce: str | None = None

    def to_json(self) -> dict[str, Any]:
        """For humans and tests (``GET /sandbox/transactions/{hash}``)."""
        body: dict[str, Any] = {
            "hash": self.hash,
            "kind": self.kind,
            "from": self.from_address,
            "to": self.to,
            "value": str(self.value),
            "block_number": self.block_number,
            "timestamp": self.timestamp,
            "network": SANDBOX_TOKEN.network,
            "asset": SANDBOX_TOKEN.address,
        }
        if self.nonce is not None:
            body["nonce"] = self.nonce
        return body


def _key(address: str) -> str:
    return address.lower()


def _checksum(address: str) -> str:
    return address if address == ZERO_ADDRESS else str(to_checksum_address(address))


def balance_of(conn: Connection, address: str) -> int:
    value = conn.execute(_BALANCE, {"address": _key(address)}).scalar()
    return int(value or 0)


def nonce_transaction(conn: Connection, authorizer: str, nonce: str) -> str | None:
    """The hash of the transaction that spent this nonce, or ``None`` while it is unused."""
    return conn.execute(
        _NONCE_TX, {"authorizer": _key(authorizer), "nonce": nonce.lower()}
    ).scalar()


def nonce_spent_by(conn: Connection, authorizer: str, nonce: str) -> tuple[str, str, int] | None:
    """The hash, kind and value of the transaction that spent this nonce (``None`` while
    it is unused): :func:`nonce_transaction` and :func:`transaction`'s kind and value in
    one read, for a caller that needs no more of it (pay-url's verdict on every test
    payment; the value is what a Permit2 ``upto`` authorization actually moved).  Permit2
    nonces share the table (:mod:`.permit2_chain`), so :func:`cancel_authorization` of one
    is Permit2's ``invalidateUnorderedNonces`` for it."""
    row = conn.execute(
        _NONCE_SPENT_BY, {"authorizer": _key(authorizer), "nonce": nonce.lower()}
    ).first()
    return None if row is None else (row.tx_hash, row.kind, int(row.value or 0))


def transaction(conn: Connection, tx_hash: str) -> Transaction | None:
    row = conn.execute(_TRANSACTION, {"tx_hash": tx_hash.lower()}).first()
    if row is None:
        return None
    return Transaction(
        hash=row.tx_hash,
        kind=row.kind,
        from_address=_checksum(row.from_address),
        to=_checksum(row.to_address),
        value=int(row.value),
        block_number=int(row.block_number),
        timestamp=int(row.created_at.timestamp()),
        nonce=row.nonce,
    )


def mint(conn: Connection, *, to: str, value: int, now: datetime) -> Transaction:
    """Create ``value`` atomic units out of nothing for ``to`` (the faucet).

    No savepoint: the credit and its record are written in the caller's transaction,
    which commits or rolls back both (pay-url mints on every test payment)."""
    if not 0 < value <= _MAX_BALANCE:
        raise ValueError(f"mint value must be a positive atomic amount, not {value!r}")
    tx_hash = "0x" + bytes(keccak(b"svc-sandbox-mint" + secrets.token_bytes(32))).hex()
    _credit(conn, _key(to), value, now)
    return _record(conn, tx_hash, MINT, ZERO_ADDRESS, _checksum(to), value, now)


def _check_window(auth: Authorization, now: datetime) -> None:
    moment = int(now.timestamp())
    if not moment > auth.valid_after:
        raise ChainError(
            VALID_AFTER,
            f"authorization is not yet valid: validAfter is {auth.valid_after}, now is {moment}",
        )
    if not moment < auth.valid_before:
        raise ChainError(
            VALID_BEFORE,
            f"authorization is expired: validBefore is {auth.valid_before}, now is {moment}",
        )


def _check_unused(conn: Connection, auth: Authorization) -> None:
    spent_by = nonce_transaction(conn, auth.from_address, auth.nonce)
    if spent_by is not None:
        raise _used(spent_by)


def _used(spent_by: str | None, reason: str = NONCE_USED) -> ChainError:
    return ChainError(
        reason, f"authorization is used: its nonce was spent by transaction {spent_by}"
    )


def _check_signature(auth: Authorization, signature: object) -> None:
    try:
        signer = recover_signer(auth, signature)
    except InvalidSignature as exc:
        raise ChainError(INVALID_SIGNATURE, f"invalid signature: {exc}") from None
    if signer != auth.from_address:
        raise ChainError(
            INVALID_SIGNATURE,
            f"invalid signature: it recovers to {signer}, not to from {auth.from_address} "
            f"(signed for another token, chain or set of parameters?)",
        )


def _insufficient(reason: str, owner: str, value: int, balance: int) -> ChainError:
    return ChainError(
        reason,
        f"transfer amount exceeds balance: {owner} holds {balance}, "
        f"the authorization moves {value} (fund it with POST /sandbox/faucet)",
    )


def check_transfer(
    conn: Connection, auth: Authorization, signature: object, *, now: datetime
) -> None:
    """Would :func:`transfer_with_authorization` succeed now?  Writes nothing (x402 verify)."""
    _check_window(auth, now)
    _check_unused(conn, auth)
    _check_signature(auth, signature)
    balance = balance_of(conn, auth.from_address)
    if balance < auth.value:
        raise _insufficient(INSUFFICIENT_BALANCE, auth.from_address, auth.value, balance)


def transfer_with_authorization(
    conn: Connection, auth: Authorization, signature: object, *, now: datetime
) -> Transaction:
    """Execute ``transferWithAuthorization``: move the value and spend the nonce, or raise
    :class:`ChainError` having written nothing."""
    _check_window(auth, now)
    _check_unused(conn, auth)  # the token's order; the insert below is what is race-safe
    _check_signature(auth, signature)
    return move_once(
        conn,
        kind=TRANSFER,
        tx_hash=transaction_hash(auth),
        owner=auth.from_address,
        nonce=auth.nonce,
        to=auth.to,
        value=auth.value,
        now=now,
        window=(auth.valid_after, auth.valid_before),
        reasons=(NONCE_USED, INSUFFICIENT_BALANCE),
    )


def move_once(
    conn: Connection,
    *,
    kind: str,
    tx_hash: str,
    owner: str,
    nonce: str,
    to: str,
    value: int,
    now: datetime,
    window: tuple[int, int],
    reasons: tuple[str, str],
) -> Transaction:
    """Spend ``owner``'s ``nonce`` and move ``value`` to ``to``, in a savepoint: all of it,
    or :class:`ChainError` (``reasons``: nonce used, balance short) having written nothing.

    The one state change behind every authorized transfer (EIP-3009 here, Permit2 in
    :mod:`.permit2_chain`), called once its authorization's checks have passed."""
    used_reason, short_reason = reasons
    if value > _MAX_BALANCE:  # no balance can hold it (and the column could not either)
        raise _insufficient(short_reason, owner, value, balance_of(conn, owner))
    payer, payee = _key(owner), _key(to)
    with conn.begin_nested():  # a refusal raised inside rolls the savepoint back
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(_n).values(
                        authorizer=payer, nonce=nonce, tx_hash=tx_hash, created_at=now
                    )
                )
        except IntegrityError:
            # Spent by a concurrent settle that committed while this one waited.
            spent_by = nonce_transaction(conn, owner, nonce) or tx_hash
            raise _used(spent_by, used_reason) from None
        # Lock rows in address order: opposite transfers cannot deadlock.
        for address in sorted({payer, payee}):
            if address == payer and not _debit(conn, payer, value, now):
                raise _insufficient(short_reason, owner, value, balance_of(conn, payer))
            if address == payee:
                _credit(conn, payee, value, now)
        return _record(
            conn,
            tx_hash,
            kind,
            owner,
            to,
            value,
            now,
            nonce=nonce,
            valid_after=window[0],
            valid_before=window[1],
        )


def cancel_authorization(
    conn: Connection, authorizer: str, nonce: str, *, now: datetime
) -> Transaction:
    """Spend ``authorizer``'s ``nonce`` without moving anything (EIP-3009
    ``cancelAuthorization``): afterwards no authorization signed with it can settle.

    On a real chain the authorizer signs the cancellation; here only the service calls
    this, for its own hot wallet, so no signature is asked for.  Raises
    :class:`ChainError` (``NONCE_USED``) having written nothing when the nonce is already
    spent -- by a settle that won the race, or by an earlier cancellation: the caller
    looks at :func:`nonce_transaction` to tell which.
    """
    payer, nonce = _key(authorizer), nonce.lower()
    tx_hash = (
        "0x" + bytes(keccak(b"svc-sandbox-cancelAuthorization" + (payer + nonce).encode())).hex()
    )
    try:
        with conn.begin_nested():
            conn.execute(
                insert(_n).values(authorizer=payer, nonce=nonce, tx_hash=tx_hash, created_at=now)
            )
            address = _checksum(payer)
            return _record(conn, tx_hash, CANCEL, address, address, 0, now, nonce=nonce)
    except IntegrityError:
        raise _used(nonce_transaction(conn, authorizer, nonce)) from None


def _debit(conn: Connection, address: str, value: int, now: datetime) -> bool:
    if value == 0:
        return True
    result = conn.execute(_DEBIT, {"debited": address, "value": value, "now": now})
    return result.rowcount == 1


def _credit(conn: Connection, address: str, value: int, now: datetime) -> None:
    """Add to a balance, creating the row on first use: one upsert, atomic on both
    databases (``INSERT … ON CONFLICT DO UPDATE``)."""
    conn.execute(
        _CREDIT[conn.dialect.name == "postgresql"],
        {"address": address, "balance": value, "updated_at": now},
    )


def _record(
    conn: Connection,
    tx_hash: str,
    kind: str,
    from_address: str,
    to_address: str,
    value: int,
    now: datetime,
    *,
    nonce: str | None = None,
    valid_after: int | None = None,
    valid_before: int | None = None,
) -> Transaction:
    """Log the transaction (its addresses checksummed, as it is answered)."""
    result = conn.execute(
        _INSERT_TX,
        {
            "tx_hash": tx_hash,
            "kind": kind,
            "from_address": _key(from_address),
            "to_address": _key(to_address),
            "value": value,
            "nonce": nonce,
            "valid_after": None if valid_after is None else str(valid_after),
            "valid_before": None if valid_before is None else str(valid_before),
            "created_at": now,
        },
    )
    key = result.inserted_primary_key
    if key is None:
        raise InvariantError("expected key is not None")
    return Transaction(
        hash=tx_hash,
        kind=kind,
        from_address=from_address,
        to=to_address,
        value=value,
        block_number=int(key[0]),
        timestamp=int(now.timestamp()),
        nonce=nonce,
    )


def audit(conn: Connection) -> list[str]:
    """Problems with the chain's books (empty when sound), for tests and operators:

    * no balance is negative;
    * every balance equals what its address received minus what it sent, per the log;
    * the supply (all balances) equals everything ever minted;
    * each authorized transfer (EIP-3009 or Permit2) or cancellation spent exactly one
      nonce, and each spent nonce names it.
    """
    problems: list[str] = []
    flows: dict[str, int] = defaultdict(int)
    minted = 0
    for row in conn.execute(
        select(_tx.c.kind, _tx.c.from_address, _tx.c.to_address, func.sum(_tx.c.value)).group_by(
            _tx.c.kind, _tx.c.from_address, _tx.c.to_address
        )
    ):
        kind, sender, receiver, total = row[0], row[1], row[2], int(row[3])
        flows[receiver] += total
        if kind == MINT:
            minted += total
        else:
            flows[sender] -= total
    balances = {row.address: int(row.balance) for row in conn.execute(select(_b))}
    for address in sorted(set(balances) | set(flows)):
        have, expected = balances.get(address, 0), flows.get(address, 0)
        if have < 0:
            problems.append(f"{address} has a negative balance {have}")
        if have != expected:
            problems.append(f"{address} holds {have} but its transactions add up to {expected}")
    if sum(balances.values()) != minted:
        problems.append(f"supply {sum(balances.values())} differs from minted {minted}")
    spent = {row.tx_hash: row.nonce for row in conn.execute(select(_n.c.tx_hash, _n.c.nonce))}
    transfers = {
        row.tx_hash: row.nonce
        for row in conn.execute(
            select(_tx.c.tx_hash, _tx.c.nonce).where(
                _tx.c.kind.in_([TRANSFER, CANCEL, PERMIT_WITNESS_TRANSFER])
            )
        )
    }
    if spent != transfers:
        problems.append(
            "spent nonces and authorized transfers or cancellations do not match one to one"
        )
    return problems

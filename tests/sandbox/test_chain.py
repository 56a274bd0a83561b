"""The sandbox chain on a real database (SQLite, or PostgreSQL with SVC_TEST_DATABASE_URL):
transferWithAuthorization's rules, in the token's order, and nothing written on refusal."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, func, select

from reference_server.sandbox import chain
from reference_server.sandbox.eip3009 import Authorization
from reference_server.store import Database
from reference_server.store import tables as t

from .helpers import DOMAIN, assert_chain_sound, authorization, migrated, new_account, sign

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    with migrated(database_url) as db:
        yield db
        assert_chain_sound(db)


def _mint(db: Database, address: str, value: int) -> chain.Transaction:
    with db.write() as conn:
        return chain.mint(conn, to=address, value=value, now=NOW)


def _transfer(db: Database, auth: dict[str, str], signature: str, now: datetime = NOW) -> object:
    with db.write() as conn:
        return chain.transfer_with_authorization(
            conn, Authorization.from_json(auth), signature, now=now
        )


def _balance(db: Database, address: str) -> int:
    with db.read() as conn:
        return chain.balance_of(conn, address)


def _rows(db: Database) -> tuple[int, int, int]:
    with db.read() as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (t.sandbox_balances, t.sandbox_nonces, t.sandbox_transactions)
        )


def _refused(db: Database, auth: dict[str, str], signature: str, now: datetime = NOW) -> str:
    before = _rows(db)
    with pytest.raises(chain.ChainError) as caught:
        _transfer(db, auth, signature, now)
    assert _rows(db) == before  # a refused transfer writes nothing
    return caught.value.reason


def test_mint_credits_and_is_logged_from_the_zero_address(db: Database) -> None:
    alice = new_account()
    tx = _mint(db, alice.address, 5_000_000)
    _mint(db, alice.address.lower(), 1)  # same account however cased
    assert _balance(db, alice.address) == 5_000_001
    with db.read() as conn:
        found = chain.transaction(conn, tx.hash)
    assert found == tx
    assert (found.kind, found.from_address, found.to) == ("mint", chain.ZERO_ADDRESS, alice.address)
    with pytest.raises(ValueError), db.write() as conn:
        chain.mint(conn, to=alice.address, value=0, now=NOW)


def test_transfer_with_authorization_moves_the_value_once(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 3_000_000)
    auth = authorization(payer, payee.address, 1_250_000, valid_before=T + 60)
    signed = sign(payer, auth)
    tx = _transfer(db, auth, signed.signature)
    assert isinstance(tx, chain.Transaction)
    assert _balance(db, payer.address) == 1_750_000
    assert _balance(db, payee.address) == 1_250_000
    with db.read() as conn:
        assert chain.transaction(conn, tx.hash) == tx
        assert chain.nonce_transaction(conn, payer.address, auth["nonce"]) == tx.hash
        spent_by = chain.nonce_spent_by(conn, payer.address.lower(), auth["nonce"].upper())
        assert spent_by == (tx.hash, chain.TRANSFER, 1_250_000)
    assert (tx.kind, tx.from_address, tx.to, tx.value) == (
        "transferWithAuthorization",
        payer.address,
        payee.address,
        1_250_000,
    )
    assert tx.nonce == auth["nonce"] and tx.timestamp == T

    # The same authorization again: the token's "authorization is used", naming the tx.
    before = _rows(db)
    with pytest.raises(chain.ChainError) as caught:
        _transfer(db, auth, signed.signature)
    assert caught.value.reason == chain.NONCE_USED == "invalid_exact_evm_nonce_already_used"
    assert tx.hash in caught.value.message
    assert _rows(db) == before
    assert _balance(db, payer.address) == 1_750_000


def test_expired_authorization_is_refused(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 10)
    auth = authorization(payer, payee.address, 1, valid_before=T)
    signature = sign(payer, auth).signature
    assert _refused(db, auth, signature) == chain.VALID_BEFORE  # now == validBefore: expired
    assert _refused(db, auth, signature, NOW + timedelta(hours=1)) == chain.VALID_BEFORE
    _transfer(db, auth, signature, NOW - timedelta(seconds=1))  # just inside the window


def test_not_yet_valid_authorization_is_refused(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 10)
    auth = authorization(payer, payee.address, 1, valid_after=T, valid_before=T + 600)
    signature = sign(payer, auth).signature
    assert _refused(db, auth, signature) == chain.VALID_AFTER  # now == validAfter: too early
    assert _refused(db, auth, signature, NOW - timedelta(minutes=5)) == chain.VALID_AFTER
    _transfer(db, auth, signature, NOW + timedelta(seconds=1))


def test_insufficient_balance_spends_no_nonce_and_can_be_retried(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 999_999)
    auth = authorization(payer, payee.address, 1_000_000, valid_before=T + 600)
    signature = sign(payer, auth).signature
    assert _refused(db, auth, signature) == chain.INSUFFICIENT_BALANCE
    # An account never seen before has nothing at all.
    stranger = new_account()
    stranger_auth = authorization(stranger, payee.address, 1, valid_before=T + 600)
    assert _refused(db, stranger_auth, sign(stranger, stranger_auth).signature) == (
        chain.INSUFFICIENT_BALANCE
    )
    # A reverted transfer left the nonce unused: funded, the same authorization pays.
    _mint(db, payer.address, 1)
    _transfer(db, auth, signature)
    assert (_balance(db, payer.address), _balance(db, payee.address)) == (0, 1_000_000)


def test_a_value_beyond_any_balance_is_insufficient_not_an_error(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 10)
    auth = authorization(payer, payee.address, 2**255, valid_before=T + 600)
    assert _refused(db, auth, sign(payer, auth).signature) == chain.INSUFFICIENT_BALANCE


@pytest.mark.parametrize("case", ["wrong-signer", "tampered-value", "wrong-chain", "wrong-name"])
def test_bad_signatures_are_refused(db: Database, case: str) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 5_000_000)
    auth = authorization(payer, payee.address, 1_000_000, valid_before=T + 600)
    if case == "wrong-signer":
        signature = sign(new_account(), auth).signature
    elif case == "tampered-value":
        signature = sign(payer, auth).signature
        auth = {**auth, "value": "4000000"}
    elif case == "wrong-chain":
        signature = sign(payer, auth, {**DOMAIN, "chainId": 8453}).signature
    else:
        signature = sign(payer, auth, {**DOMAIN, "name": "USD Coin"}).signature
    assert _refused(db, auth, signature) == chain.INVALID_SIGNATURE
    assert _balance(db, payer.address) == 5_000_000


def test_check_transfer_verifies_without_writing(db: Database) -> None:
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 100)
    auth = authorization(payer, payee.address, 100, valid_before=T + 600)
    signature = sign(payer, auth).signature
    before = _rows(db)
    with db.write() as conn:
        chain.check_transfer(conn, Authorization.from_json(auth), signature, now=NOW)
        with pytest.raises(chain.ChainError) as caught:
            too_much = Authorization.from_json({**auth, "value": "101"})
            chain.check_transfer(conn, too_much, sign(payer, too_much.to_json()).signature, now=NOW)
        assert caught.value.reason == chain.INSUFFICIENT_BALANCE
    assert _rows(db) == before
    _transfer(db, auth, signature)
    with db.read() as conn, pytest.raises(chain.ChainError) as caught:
        chain.check_transfer(conn, Authorization.from_json(auth), signature, now=NOW)
    assert caught.value.reason == chain.NONCE_USED


def test_a_refused_transfer_leaves_the_callers_transaction_usable(db: Database) -> None:
    """The next step settles and credits a seller in one transaction: a refusal inside it
    must roll back only itself (a SAVEPOINT), never poison the rest."""
    payer, payee = new_account(), new_account()
    auth = authorization(payer, payee.address, 5, valid_before=T + 600)
    with db.write() as conn:
        chain.mint(conn, to=payer.address, value=4, now=NOW)
        with pytest.raises(chain.ChainError):
            chain.transfer_with_authorization(
                conn, Authorization.from_json(auth), sign(payer, auth).signature, now=NOW
            )
        chain.mint(conn, to=payer.address, value=1, now=NOW)
        tx = chain.transfer_with_authorization(
            conn, Authorization.from_json(auth), sign(payer, auth).signature, now=NOW
        )
    with db.read() as conn:
        assert chain.transaction(conn, tx.hash) == tx
    assert (_balance(db, payer.address), _balance(db, payee.address)) == (0, 5)


def test_nonces_are_per_authorizer(db: Database) -> None:
    alice, bob, shop = new_account(), new_account(), new_account()
    _mint(db, alice.address, 10)
    _mint(db, bob.address, 10)
    nonce = "0x" + "11" * 32
    for payer in (alice, bob):
        auth = authorization(payer, shop.address, 3, valid_before=T + 600, nonce=nonce)
        _transfer(db, auth, sign(payer, auth).signature)
    assert _balance(db, shop.address) == 6


def test_opposite_and_self_transfers(db: Database) -> None:
    alice, bob = new_account(), new_account()
    _mint(db, alice.address, 10)
    _mint(db, bob.address, 10)
    for payer, payee in ((alice, bob), (bob, alice), (alice, alice)):
        auth = authorization(payer, payee.address, 4, valid_before=T + 600)
        _transfer(db, auth, sign(payer, auth).signature)
    assert (_balance(db, alice.address), _balance(db, bob.address)) == (10, 10)


def test_migration_matches_the_table_definitions(db: Database) -> None:
    sandbox = MetaData()
    chain = {"sandbox_balances", "sandbox_nonces", "sandbox_transactions"}
    for table in (t.sandbox_balances, t.sandbox_nonces, t.sandbox_transactions):
        table.to_metadata(sandbox)
    with db.engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_name": lambda name, kind, _: kind != "table" or name in chain}
        )
        assert compare_metadata(context, sandbox) == []


def test_nonce_spent_by_names_the_transaction_its_kind_and_value(db: Database) -> None:
    """An unused nonce, a cancelled one and a spent one, each in one read (pay-url's
    verdict on every test payment; the value is what an ``upto`` authorization moved)."""
    payer, payee = new_account(), new_account()
    _mint(db, payer.address, 1_000_000)
    used = authorization(payer, payee.address, 1, valid_before=T + 60)
    _transfer(db, used, sign(payer, used).signature)
    cancelled = authorization(payer, payee.address, 1, valid_before=T + 60)
    with db.write() as conn:
        assert chain.nonce_spent_by(conn, payer.address, cancelled["nonce"]) is None
        cancel = chain.cancel_authorization(conn, payer.address, cancelled["nonce"], now=NOW)
    with db.read() as conn:
        assert chain.nonce_spent_by(conn, payer.address, cancelled["nonce"]) == (
            cancel.hash,
            cancel.kind,
            0,
        )
        assert cancel.kind != chain.TRANSFER
        spent = chain.nonce_spent_by(conn, payer.address, used["nonce"])
        assert spent is not None and spent[1:] == (chain.TRANSFER, 1)
        assert chain.nonce_spent_by(conn, payee.address, used["nonce"]) is None  # per payer

"""x402 ``upto`` on the sandbox chain, paid by the official x402 client: the payer signs a
maximum (Permit2), the facilitator settles the actual amount once, on a real database
(SQLite, or PostgreSQL with SVC_TEST_DATABASE_URL) and over HTTP."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select
from x402 import x402Client, x402ResourceServerSync
from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync
from x402.mechanisms.evm import constants as x402_evm
from x402.mechanisms.evm.upto import UptoEvmClientScheme, UptoEvmServerScheme
from x402.schemas import PaymentPayload, PaymentRequired, PaymentRequirements, ResourceConfig

from reference_server.sandbox import chain, facilitator, permit2, permit2_chain
from reference_server.sandbox.permit2 import PermitWitnessTransfer
from reference_server.store import Database
from reference_server.store import tables as t

from ..support import LiveServer
from .helpers import NETWORK, USDC, assert_chain_sound, balance, fund, migrated, new_account
from .test_routes import assert_chain_sound as assert_served_chain_sound

MAX = 500_000  # $0.50, the maximum the payer signs
FUNDS = 2_000_000


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    with migrated(database_url) as db:
        yield db
        assert_chain_sound(db)


def requirements(pay_to: str, amount: int = MAX, **extra: Any) -> PaymentRequirements:
    """``upto`` requirements as x402's upto server builds them from ``/supported``."""
    return PaymentRequirements(
        scheme="upto",
        network=NETWORK,
        asset=USDC,
        amount=str(amount),
        pay_to=pay_to,
        max_timeout_seconds=300,
        extra={
            "name": "USDC",
            "version": "2",
            "assetTransferMethod": "permit2",
            "facilitatorAddress": facilitator.FACILITATOR_ADDRESS,
            **extra,
        },
    )


def signed(payer: LocalAccount, reqs: PaymentRequirements) -> PaymentPayload:
    """The official x402 client's payload for ``reqs``."""
    client = x402Client().register("eip155:*", UptoEvmClientScheme(payer))
    payload = asyncio.run(client.create_payment_payload(PaymentRequired(accepts=[reqs])))
    assert isinstance(payload, PaymentPayload)
    return payload


def body(payload: PaymentPayload, reqs: PaymentRequirements, amount: int | None = None) -> dict:
    """A verify/settle body as ``HTTPFacilitatorClient`` sends it; ``amount`` replaces the
    requirements' (settle's actual amount)."""
    wire = reqs.model_dump(by_alias=True, exclude_none=True)
    if amount is not None:
        wire["amount"] = str(amount)
    return {
        "x402Version": 2,
        "paymentPayload": payload.model_dump(by_alias=True, exclude_none=True),
        "paymentRequirements": wire,
    }


def resigned(payer: LocalAccount, payload: PaymentPayload, **changes: Any) -> PaymentPayload:
    """``payload`` with its authorization changed (``spender``, ``deadline``, or a witness
    field) and signed again by ``payer`` with x402's own Permit2 type table, so that only
    the change is wrong."""
    auth = dict(payload.payload["permit2Authorization"])
    witness = dict(auth["witness"])
    for key, value in changes.items():
        (witness if key in witness else auth)[key] = value
    auth["witness"] = witness
    message = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            **x402_evm.UPTO_PERMIT2_WITNESS_TYPES,
        },
        "primaryType": "PermitWitnessTransferFrom",
        "domain": {
            "name": "Permit2",
            "chainId": 84532,
            "verifyingContract": x402_evm.PERMIT2_ADDRESS,
        },
        "message": {
            "permitted": {
                "token": auth["permitted"]["token"],
                "amount": int(auth["permitted"]["amount"]),
            },
            "spender": auth["spender"],
            "nonce": int(auth["nonce"]),
            "deadline": int(auth["deadline"]),
            "witness": {
                "to": witness["to"],
                "facilitator": witness["facilitator"],
                "validAfter": int(witness["validAfter"]),
            },
        },
    }
    signature = payer.sign_message(encode_typed_data(full_message=message)).signature
    inner = {"permit2Authorization": auth, "signature": "0x" + bytes(signature).hex()}
    return payload.model_copy(update={"payload": inner})


def _now() -> datetime:
    return datetime.now(UTC)


def _fund(db: Database, address: str, value: int = FUNDS) -> None:
    with db.write() as conn:
        chain.mint(conn, to=address, value=value, now=_now())


def _balance(db: Database, address: str) -> int:
    with db.read() as conn:
        return chain.balance_of(conn, address)


def _verify(db: Database, request: dict, now: datetime | None = None) -> dict:
    with db.read() as conn:
        return facilitator.verify(conn, request, now=now or _now())


def _settle(db: Database, request: dict, now: datetime | None = None) -> dict:
    with db.write() as conn:
        return facilitator.settle(conn, request, now=now or _now())


def _rows(db: Database) -> tuple[int, ...]:
    with db.read() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (t.sandbox_balances, t.sandbox_nonces, t.sandbox_transactions)
        )


def test_the_permit2_constants_are_x402s() -> None:
    assert permit2.PERMIT2_ADDRESS == x402_evm.PERMIT2_ADDRESS
    assert permit2.UPTO_PROXY_ADDRESS == x402_evm.X402_UPTO_PERMIT2_PROXY_ADDRESS


def test_verify_the_maximum_then_settle_the_actual_amount_once(db: Database) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    reqs = requirements(shop.address)
    payload = signed(payer, reqs)

    assert _verify(db, body(payload, reqs)) == {"isValid": True, "payer": payer.address}
    settled = _settle(db, body(payload, reqs, amount=123_456))

    assert settled["success"] is True, settled
    assert (settled["amount"], settled["payer"], settled["network"]) == (
        "123456",
        payer.address,
        NETWORK,
    )
    assert (_balance(db, payer.address), _balance(db, shop.address)) == (
        FUNDS - 123_456,
        123_456,
    )
    permit = PermitWitnessTransfer.from_json(payload.payload["permit2Authorization"])
    with db.read() as conn:
        tx = chain.transaction(conn, settled["transaction"])
        spent_by = chain.nonce_transaction(conn, payer.address, permit.nonce_key)
    assert tx is not None and spent_by == tx.hash
    assert (tx.kind, tx.from_address, tx.to, tx.value) == (
        "permitWitnessTransferFrom",
        payer.address,
        shop.address,
        123_456,
    )

    # A replay, at any amount, is refused naming the settlement; verify says so too.
    before = _rows(db)
    for amount in (123_456, 1, MAX):
        again = _settle(db, body(payload, reqs, amount=amount))
        assert (again["success"], again["errorReason"]) == (False, "permit2_invalid_nonce")
        assert tx.hash in again["errorMessage"] and again["transaction"] == ""
    assert _verify(db, body(payload, reqs))["invalidReason"] == "permit2_invalid_nonce"
    assert _rows(db) == before
    assert _balance(db, shop.address) == 123_456


def test_the_whole_maximum_can_be_settled_but_not_more(db: Database) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    reqs = requirements(shop.address)
    payload = signed(payer, reqs)
    before = _rows(db)

    above = _settle(db, body(payload, reqs, amount=MAX + 1))

    assert (above["success"], above["errorReason"]) == (
        False,
        "invalid_upto_evm_payload_settlement_exceeds_amount",
    )
    assert _rows(db) == before
    assert _settle(db, body(payload, reqs, amount=MAX))["amount"] == str(MAX)
    assert _balance(db, shop.address) == MAX


def test_zero_succeeds_with_no_transaction(db: Database) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    reqs = requirements(shop.address)
    payload = signed(payer, reqs)
    before = _rows(db)

    zero = _settle(db, body(payload, reqs, amount=0))

    assert zero == {
        "success": True,
        "payer": payer.address,
        "transaction": "",
        "network": NETWORK,
        "amount": "0",
    }
    assert _rows(db) == before  # no transaction, no nonce spent, no balance moved
    assert _balance(db, payer.address) == FUNDS


def _forged_by_another_key(payer: LocalAccount, reqs: PaymentRequirements) -> PaymentPayload:
    forged = signed(new_account(), reqs)
    auth = dict(forged.payload["permit2Authorization"], **{"from": payer.address})
    return forged.model_copy(update={"payload": {**forged.payload, "permit2Authorization": auth}})


def _raised_maximum(payer: LocalAccount, reqs: PaymentRequirements) -> PaymentPayload:
    payload = signed(payer, reqs)
    auth = dict(payload.payload["permit2Authorization"])
    auth["permitted"] = {**auth["permitted"], "amount": str(MAX * 10)}
    return payload.model_copy(update={"payload": {**payload.payload, "permit2Authorization": auth}})


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_forged_by_another_key, "invalid_permit2_signature"),
        (_raised_maximum, "invalid_permit2_signature"),
        (
            lambda p, r: resigned(
                p, signed(p, r), spender=x402_evm.X402_EXACT_PERMIT2_PROXY_ADDRESS
            ),
            "invalid_permit2_spender",
        ),
        (
            lambda p, r: resigned(p, signed(p, r), to=new_account().address),
            "invalid_permit2_recipient_mismatch",
        ),
        (
            lambda p, r: signed(
                p, requirements(r.pay_to, facilitatorAddress=new_account().address)
            ),
            "upto_facilitator_mismatch",
        ),
        (
            lambda p, r: resigned(p, signed(p, r), validAfter=str(int(_now().timestamp()) + 600)),
            "permit2_not_yet_valid",
        ),
        (
            lambda p, r: resigned(p, signed(p, r), deadline=str(int(_now().timestamp()) + 3)),
            "permit2_deadline_expired",
        ),
    ],
    ids=[
        "forged",
        "raised-maximum",
        "wrong-spender",
        "wrong-recipient",
        "other-facilitator",
        "not-yet-valid",
        "expired",
    ],
)
def test_a_bad_authorization_neither_verifies_nor_settles(
    db: Database, tamper: Any, reason: str
) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    reqs = requirements(shop.address)
    payload = tamper(payer, reqs)
    if tamper is _raised_maximum:  # the requirements ask what the tampered permit says
        reqs = requirements(shop.address, amount=MAX * 10)
    before = _rows(db)

    verdict = _verify(db, body(payload, reqs))
    settled = _settle(db, body(payload, reqs, amount=1_000))

    assert (verdict["isValid"], verdict["invalidReason"]) == (False, reason), verdict
    assert (settled["success"], settled["errorReason"]) == (False, reason), settled
    assert verdict["payer"] == settled["payer"] == payer.address
    assert _rows(db) == before


def test_an_authorization_past_its_deadline_is_refused_at_settle(db: Database) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    reqs = requirements(shop.address)
    payload = signed(payer, reqs)
    later = _now() + timedelta(seconds=301)

    settled = _settle(db, body(payload, reqs, amount=1_000), now=later)

    assert settled["errorReason"] == "permit2_deadline_expired"
    assert _balance(db, payer.address) == FUNDS


def test_verify_asks_the_maximum_and_a_balance_for_it(db: Database) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address, MAX - 1)
    reqs = requirements(shop.address)
    payload = signed(payer, reqs)

    other_max = _verify(db, body(payload, requirements(shop.address, amount=MAX - 1)))
    short = _verify(db, body(payload, reqs))

    assert other_max["invalidReason"] == "permit2_amount_mismatch"
    assert short["invalidReason"] == "permit2_insufficient_balance"
    # What is there can still be settled (the actual amount is within the balance).
    assert _settle(db, body(payload, reqs, amount=MAX - 1))["success"] is True


def test_an_exact_payload_under_upto_requirements_is_an_unsupported_payload_type(
    db: Database,
) -> None:
    shop = new_account()
    reqs = requirements(shop.address)
    request = body(signed(new_account(), reqs), reqs)
    request["paymentPayload"]["payload"] = {"authorization": {}, "signature": "0x"}

    assert _verify(db, request)["invalidReason"] == "unsupported_payload_type"


def test_the_chain_takes_no_more_than_permitted_and_only_from_the_named_facilitator(
    db: Database,
) -> None:
    payer, shop = new_account(), new_account()
    _fund(db, payer.address)
    payload = signed(payer, requirements(shop.address))
    permit = PermitWitnessTransfer.from_json(payload.payload["permit2Authorization"])
    signature = payload.payload["signature"]

    def refusal(amount: int, sender: str) -> str:
        with pytest.raises(chain.ChainError) as caught, db.write() as conn:
            permit2_chain.permit_witness_transfer_from(
                conn, permit, signature, amount=amount, sender=sender, now=_now()
            )
        return caught.value.reason

    assert refusal(MAX + 1, facilitator.FACILITATOR_ADDRESS) == "upto_amount_exceeds_permitted"
    assert refusal(1, new_account().address) == "upto_unauthorized_facilitator"
    assert _balance(db, payer.address) == FUNDS


def test_the_official_resource_server_and_facilitator_client_settle_over_http(
    server: LiveServer,
) -> None:
    """x402's own upto server scheme reads ``/supported`` (the facilitator address) and
    its facilitator client verifies the maximum and settles the actual amount."""
    payer, shop = new_account(), new_account()
    fund(server.url, payer.address, "2")
    facilitator_client = HTTPFacilitatorClientSync(
        FacilitatorConfig(url=server.url + "/sandbox/x402")
    )
    seller = x402ResourceServerSync(facilitator_client)
    seller.register(NETWORK, UptoEvmServerScheme())
    seller.initialize()
    [reqs] = seller.build_payment_requirements(
        ResourceConfig(scheme="upto", pay_to=shop.address, price="$0.50", network=NETWORK)
    )
    assert reqs.extra["facilitatorAddress"] == facilitator.FACILITATOR_ADDRESS
    payload = signed(payer, reqs)

    verified = facilitator_client.verify(payload, reqs)
    settled = facilitator_client.settle(payload, reqs.model_copy(update={"amount": "31415"}))
    again = facilitator_client.settle(payload, reqs.model_copy(update={"amount": "31415"}))

    assert verified.is_valid, verified
    assert (settled.success, settled.amount, settled.payer) == (True, "31415", payer.address)
    assert (again.success, again.error_reason) == (False, "permit2_invalid_nonce")
    assert balance(server.url, shop.address) == 31_415
    assert balance(server.url, payer.address) == 2_000_000 - 31_415
    assert_served_chain_sound(server)


@pytest.mark.anyio
async def test_twenty_concurrent_settles_of_one_authorization_move_money_once(
    server: LiveServer,
) -> None:
    payer, shop = new_account(), new_account()
    fund(server.url, payer.address, "2")
    reqs = requirements(shop.address)
    client = x402Client().register("eip155:*", UptoEvmClientScheme(payer))
    payload = await client.create_payment_payload(PaymentRequired(accepts=[reqs]))
    assert isinstance(payload, PaymentPayload)
    request = body(payload, reqs, amount=250_000)

    async with httpx.AsyncClient(timeout=120) as http:

        async def one() -> dict[str, Any]:
            r = await http.post(server.url + "/sandbox/x402/settle", json=request)
            assert r.status_code == 200, r.text
            return dict(r.json())

        answers = await asyncio.gather(*(one() for _ in range(20)))

    outcomes = Counter("settled" if a["success"] else a["errorReason"] for a in answers)
    assert outcomes == Counter({"settled": 1, "permit2_invalid_nonce": 19})
    [tx] = {a["transaction"] for a in answers if a["success"]}
    assert all(tx in a["errorMessage"] for a in answers if not a["success"])
    assert balance(server.url, payer.address) == 2_000_000 - 250_000
    assert balance(server.url, shop.address) == 250_000
    assert_served_chain_sound(server)

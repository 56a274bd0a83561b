"""Top-ups in ``test``: paid from a sandbox faucet wallet, through the SDK, pympp's client
and the CLI, on the sandbox chain; the refusals credit nothing."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import svc
from reference_server.domain import top_ups
from reference_server.domain.open_rails import TEST_DEPOSIT_ADDRESS
from reference_server.store import tables as t
from svc.cli import _build

from ..money.helpers import events_of
from ..rails.helpers import balance, funded_payer, new_account
from ..support import LiveServer
from ..support import new_account as new_owner
from .helpers import (
    PATH,
    account_wallet,
    challenge_of,
    mpp_top_up,
    owner_client,
    owner_headers,
    signed,
    with_headers,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_the_sdk_pays_a_top_up_from_a_faucet_wallet(server: LiveServer) -> None:
    owner = new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "2")
    deposits = balance(server.url, TEST_DEPOSIT_ADDRESS)

    top_up = client.top_ups.create("0.75", payer=payer)

    assert top_up.id.startswith("tu_") and top_up.amount == Decimal("0.75")
    assert (top_up.environment, top_up.status, top_up.rail) == ("test", "succeeded", "x402")
    assert top_up.payer == payer.address and top_up.tx_hash.startswith("0x")
    assert balance(server.url, TEST_DEPOSIT_ADDRESS) - deposits == 750_000
    assert balance(server.url, payer.address) == 1_250_000
    assert account_wallet(server, owner.owner_id, "test") == 750_000
    [paid] = events_of(server, owner.owner_id, "funding.paid")
    assert paid["source"] == "x402" and paid["tx_hash"] == top_up.tx_hash
    assert paid["top_up_id"] == top_up.id and paid["wallet_key_id"] is None
    assert paid["amount"] == "0.75" and paid["account_wallet_balance"] == "0.75"
    assert attrs.evolve(client.top_ups.get(top_up.id), request_id=None) == attrs.evolve(
        top_up, request_id=None
    )
    assert [t.id for t in client.top_ups.list_all()] == [top_up.id]

    # pympp's client pays with Authorization: Payment (the owner JWT in its own header).
    answer = anyio.run(mpp_top_up, server.url, owner.owner_jwt, payer, "0.50")
    assert answer.status_code == 201, answer.text
    assert answer.json()["rail"] == "mpp"
    assert account_wallet(server, owner.owner_id, "test") == 1_250_000
    assert [e["source"] for e in events_of(server, owner.owner_id, "funding.paid")] == [
        "x402",
        "mpp",
    ]
    assert [t.amount for t in client.top_ups.list().data] == [Decimal("0.50"), Decimal("0.75")]


def test_a_credential_pays_once_and_an_idempotent_retry_answers_the_same_top_up(
    server: LiveServer,
) -> None:
    owner = new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "1")
    credential = signed(challenge_of(client, "0.30"), payer, "0.30")

    first = client.top_ups.create("0.30", options=with_headers(credential, "key-1"))
    again = client.top_ups.create("0.30", options=with_headers(credential, "key-1"))
    assert again.id == first.id and again.tx_hash == first.tx_hash
    with pytest.raises(svc.PaymentRequiredError) as replay:
        client.top_ups.create("0.30", options=with_headers(credential, "key-2"))
    assert replay.value.status == 402 and "payment-required" not in replay.value.headers
    with pytest.raises(svc.UnprocessableEntityError) as reused:
        client.top_ups.create("0.40", options=with_headers(credential, "key-1"))
    assert reused.value.code == "idempotency_key_reused"
    assert account_wallet(server, owner.owner_id, "test") == 300_000
    assert balance(server.url, payer.address) == 700_000
    assert len(client.top_ups.list().data) == 1


def test_refused_credentials_credit_nothing(server: LiveServer) -> None:
    owner, other = new_owner(server.url), new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "1")
    deposits = balance(server.url, TEST_DEPOSIT_ADDRESS)

    # Signed for 0.20, presented for 0.90.
    cheap = signed(challenge_of(client, "0.20"), payer, "0.20")
    with pytest.raises(svc.PaymentRequiredError) as wrong_amount:
        client.top_ups.create("0.90", options=with_headers(cheap))
    assert "payment-required" in wrong_amount.value.headers  # a fresh challenge
    # Signed for this owner's top-up, presented by another owner.
    theirs = owner_client(server.url, other.owner_jwt)
    with pytest.raises(svc.PaymentRequiredError):
        theirs.top_ups.create("0.20", options=with_headers(cheap))
    # An unfunded payer: the sandbox chain refuses the transfer.
    broke = new_account()
    with pytest.raises(svc.PaymentRequiredError) as unfunded:
        client.top_ups.create("0.20", payer=broke)
    assert unfunded.value.details is not None and unfunded.value.details["rail"] == "x402"

    assert balance(server.url, TEST_DEPOSIT_ADDRESS) == deposits
    assert balance(server.url, payer.address) == 1_000_000
    assert account_wallet(server, owner.owner_id, "test") == 0
    assert account_wallet(server, other.owner_id, "test") == 0
    assert events_of(server, owner.owner_id, "funding.paid") == []
    # The refused authorization was released: it still pays the top-up it was made for.
    assert client.top_ups.create("0.20", options=with_headers(cheap)).amount == Decimal("0.20")


@pytest.mark.parametrize("amount", ["0", "-1", "abc", "0.0000001", None])
def test_a_bad_amount_is_a_validation_error(server: LiveServer, amount: str | None) -> None:
    owner = new_owner(server.url)
    body = {} if amount is None else {"amount": amount}
    answer = httpx.post(server.url + PATH, json=body, headers=owner_headers(owner.owner_jwt))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "validation_error"


def test_top_ups_need_the_owner_jwt(server: LiveServer) -> None:
    owner = new_owner(server.url)
    for headers in ({}, {"Authorization": f"Bearer {owner.seller_key}"}):
        answer = httpx.post(server.url + PATH, json={"amount": "1"}, headers=headers)
        assert answer.status_code in (401, 403), answer.text
        assert "PAYMENT-REQUIRED" not in answer.headers
    for path in (PATH, PATH + "/tu_01m8d6evrpb82wmmbcve67m4z6"):
        assert httpx.get(server.url + path).status_code == 401
    missing = httpx.get(
        server.url + PATH + "/tu_01m8d6evrpb82wmmbcve67m4z6", headers=owner_headers(owner.owner_jwt)
    )
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_live_top_ups_need_a_facilitator(server: LiveServer) -> None:
    owner = new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt, "live")
    with pytest.raises(svc.ServerError) as unavailable:
        client.top_ups.create("1")
    assert unavailable.value.code == "top_ups_unavailable"


def test_the_cli_tops_up_from_a_key_file(server: LiveServer, tmp_path: Path) -> None:
    owner = new_owner(server.url)
    payer = funded_payer(server, "1")
    key_file = tmp_path / "payer.key"
    key_file.write_text(payer.key.hex() + "\n")
    base = ["--base-url", server.url, "--owner-jwt", owner.owner_jwt, "--environment", "test"]
    args = [*base, "top-up", "0.40", "--private-key-file", str(key_file)]
    result = CliRunner().invoke(_build(), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    paid = json.loads(result.output[result.output.index("{") :])
    assert paid["amount"] == "0.40" and paid["rail"] == "x402"
    assert account_wallet(server, owner.owner_id, "test") == 400_000
    listed = CliRunner().invoke(_build(), [*base, "top-ups"], catch_exceptions=False)
    assert paid["id"] in listed.output
    broke = tmp_path / "broke.key"
    broke.write_text(new_account().key.hex())
    args = [*base, "top-up", "0.40", "--private-key-file", str(broke)]
    refused = CliRunner().invoke(_build(), args, catch_exceptions=False)
    assert refused.exit_code == 1 and "402 payment_required" in refused.output


def test_a_credential_sent_many_times_at_once_pays_once(server: LiveServer) -> None:
    owner = new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "1")
    credential = signed(challenge_of(client, "0.25"), payer, "0.25")

    def send(n: int) -> int:
        headers = owner_headers(owner.owner_jwt, **credential, **{"Idempotency-Key": f"k{n}"})
        return httpx.post(server.url + PATH, json={"amount": "0.25"}, headers=headers).status_code

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = sorted(pool.map(send, range(6)))
    assert statuses == [201, 402, 402, 402, 402, 402]
    assert account_wallet(server, owner.owner_id, "test") == 250_000
    assert balance(server.url, payer.address) == 750_000


def test_top_ups_sent_many_times_at_once_under_one_key_pay_once(server: LiveServer) -> None:
    owner = new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "1")
    credential = signed(challenge_of(client, "0.25"), payer, "0.25")
    headers = owner_headers(owner.owner_jwt, **credential, **{"Idempotency-Key": "one-key"})

    def send(_: int) -> httpx.Response:
        return httpx.post(server.url + PATH, json={"amount": "0.25"}, headers=headers)

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(send, range(6)))
    paid = [a.json()["id"] for a in answers if a.status_code == 201]
    waiting = [a.json()["error"]["code"] for a in answers if a.status_code == 409]
    assert len(paid) + len(waiting) == 6 and len(set(paid)) == 1, [a.text for a in answers]
    assert set(waiting) <= {"idempotency_in_progress"}
    again = send(0)  # the key's top-up, answered again
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == paid[0]
    assert account_wallet(server, owner.owner_id, "test") == 250_000
    assert balance(server.url, payer.address) == 750_000
    assert len(client.top_ups.list().data) == 1


def test_a_keys_top_up_is_found_only_for_its_own_owner_and_environment(
    server: LiveServer,
) -> None:
    # The lookup a repeated key makes is scoped to the caller at the query itself, not
    # only through the key record's scope: another owner, or the other environment,
    # given the same record id, finds nothing.
    owner, other = new_owner(server.url), new_owner(server.url)
    client = owner_client(server.url, owner.owner_jwt)
    payer = funded_payer(server, "1")
    credential = signed(challenge_of(client, "0.30"), payer, "0.30")
    made = client.top_ups.create("0.30", options=with_headers(credential, "scoped-1"))
    with server.ctx.db.read() as conn:
        row = conn.execute(sa.select(t.top_ups).where(t.top_ups.c.id == made.id)).one()
        record_id = row.idempotency_record_id
        assert record_id is not None

        def found(owner_id: str, environment: str) -> Any:
            return top_ups.find_by_record(
                conn, record_id, owner_id=owner_id, environment=environment
            )

        assert found(owner.owner_id, "test").id == made.id
        assert found(other.owner_id, "test") is None
        assert found(owner.owner_id, "live") is None

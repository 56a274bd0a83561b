"""pay-url pays real sellers on loopback -- x402's own middleware and a pympp-gated app --
through the sandbox chain, and everything it reports can be checked on the chain and in
the ledger."""

from __future__ import annotations

import httpx
import pytest

from svc.receipts import ReceiptTokenError, verify

from ..sandbox.helpers import serve, transaction
from ..support import LiveServer
from .apps import PRICE, x402_v1_app
from .helpers import Agent, attempt_row, chain_balance, hot_address, make_agent, price

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_pays_an_x402_middleware_app(
    server: LiveServer, agent: Agent, x402_url: str, pay_to: str
) -> None:
    before = agent.spend()
    r = agent.pay_url(x402_url)
    assert r.status_code == 200, r.text
    paid = r.json()
    assert paid["ok"] is True and paid["status"] == "succeeded" and paid["rail"] == "x402"
    assert paid["request_id"] == r.headers["x-request-id"]
    assert paid["body"] == '{"report":"the goods"}' and paid["body_truncated"] is False
    assert paid["headers"]["content-type"] == "application/json"
    assert paid["unlocked"] is True and paid["upstream_status"] == 200
    assert paid["amount"] == "0.25" and paid["receipt_id"].startswith("rcpt_")
    # a third party's URL: the payer's receipt only (the seller's is not ours to know)
    assert paid["payer_receipt_id"] == paid["receipt_id"] and paid["seller_receipt_id"] is None
    tx = transaction(server.url, paid["tx_hash"])
    assert (tx["kind"], tx["from"], tx["to"], tx["value"]) == (
        "transferWithAuthorization",
        hot_address(server),
        pay_to,
        str(PRICE),
    )
    assert chain_balance(server, pay_to) == PRICE
    after = agent.spend()
    assert before.balance - after.balance == price(PRICE)
    assert after.spent_total == price(PRICE)
    row = attempt_row(server, paid["attempt_id"])
    assert (row.status, row.receipt_id, row.tx_hash) == (
        "succeeded",
        paid["receipt_id"],
        tx["hash"],
    )


@pytest.mark.parametrize("rails", [None, ["mpp"]])
def test_pays_a_pympp_app_on_either_rail(
    server: LiveServer, mpp_url: str, pay_to: str, rails: list[str] | None
) -> None:
    agent = make_agent(server, allowed_rails=rails)
    r = agent.pay_url(mpp_url)
    assert r.status_code == 200, r.text
    paid = r.json()
    assert paid["rail"] == ("mpp" if rails else "x402")
    assert paid["body"].startswith('{"report":"the goods"')
    tx = transaction(server.url, paid["tx_hash"])
    assert (tx["from"], tx["to"], tx["value"]) == (hot_address(server), pay_to, str(PRICE))
    assert chain_balance(server, pay_to) == PRICE
    assert agent.spend().spent_total == price(PRICE)


def test_sdk_pays_and_lists(server: LiveServer, agent: Agent, x402_url: str) -> None:
    paid = agent.client.spend.pay_url(x402_url)
    assert paid.rail == "x402" and paid.content == b'{"report":"the goods"}'
    listed = agent.client.spend.attempts()
    assert [a.id for a in listed.data] == [paid.attempt_id]
    assert listed.data[0].status == "succeeded" and listed.data[0].tx_hash == paid.tx_hash
    assert httpx.get(server.url + "/health").status_code == 200


def test_a_paid_url_answers_a_signed_receipt_the_agent_verifies_offline(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    """The payer's receipt, signed: proof the agent paid that anyone checks against the
    service's published keys, with no call to the service; a replay answers one too."""
    first = agent.pay_url(x402_url, key="proof-1")
    assert first.status_code == 200, first.text
    paid = first.json()
    jwks = httpx.get(server.url + "/.well-known/jwks.json").json()
    proof = verify(paid["receipt_token"], jwks)
    assert (proof.receipt_id, proof.amount, proof.rail, proof.environment) == (
        paid["receipt_id"],
        price(PRICE),
        "x402",
        "test",
    )
    assert proof.tx_hash == paid["tx_hash"]
    replay = agent.pay_url(x402_url, key="proof-1").json()
    assert replay["attempt_id"] == paid["attempt_id"]
    assert verify(replay["receipt_token"], jwks).receipt_id == paid["receipt_id"]
    with pytest.raises(ReceiptTokenError):
        verify(paid["receipt_token"], {"keys": []})  # not the service's keys: refused
    by_sdk = agent.client.spend.pay_url(x402_url)
    assert by_sdk.receipt_token is not None
    assert verify(by_sdk.receipt_token, jwks).receipt_id == by_sdk.receipt_id
    assert by_sdk.receipt_token not in repr(by_sdk)  # a bearer proof, masked


def test_pays_an_x402_v1_seller(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str
) -> None:
    """x402 v1: the challenge is the 402's body, the payment goes in ``X-PAYMENT``."""
    with serve(x402_v1_app(facilitator, pay_to, 120_000)) as url:
        unpaid = httpx.get(url + "/report")
        assert unpaid.status_code == 402 and unpaid.json()["x402Version"] == 1
        r = agent.pay_url(url + "/report")
    assert r.status_code == 200, r.text
    paid = r.json()
    assert (paid["rail"], paid["amount"], paid["body"]) == (
        "x402",
        "0.12",
        '{"report":"the v1 goods"}',
    )
    assert "x-payment-response" in paid["headers"]
    tx = transaction(server.url, paid["tx_hash"])
    assert (tx["from"], tx["to"], tx["value"]) == (hot_address(server), pay_to, "120000")
    assert agent.spend().spent_total == price(120_000)

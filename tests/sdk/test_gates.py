"""``client.gates.challenge`` / ``client.gates.redeem`` (what ``svc_asgi`` asks the service
for open rails) on both clients, against an ``httpx.MockTransport``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from sdk_support import SELLER_KEY, Twin, check_request, fail, ok

import svc

pytestmark = pytest.mark.anyio

URL = "https://shop.example/v1/report?page=2"
CHALLENGE = {"headers": [["WWW-Authenticate", 'Payment id="abc"'], ["PAYMENT-REQUIRED", "eyJ9"]]}
VERIFICATION = {
    "valid": True,
    "receipt_id": "rcpt_1",
    "resource_id": "res_1",
    "amount": "0.25",
    "rail": "x402",
    "metadata": {"sku_kind": "one_shot"},
    "environment": "test",
}
PAID = {
    "paid": True,
    "rail": "x402",
    "verification": VERIFICATION,
    "headers": [["Payment-Receipt", "eyJy"], ["PAYMENT-RESPONSE", "eyJz"]],
}
REFUSED = {
    "paid": False,
    "rail": "mpp",
    "reason": "receipt_refused",
    "message": "Payment verification failed: EVM authorization has already been used",
    "headers": [],
}


async def test_challenge_sends_method_and_url_and_reads_header_pairs(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(CHALLENGE))
    answer = await twin.call(client, lambda c: c.gates.challenge("res_1", method="get", url=URL))
    assert isinstance(answer, svc.GateChallenge) and answer.request_id == "req_ok"
    assert answer.headers == [
        ("WWW-Authenticate", 'Payment id="abc"'),
        ("PAYMENT-REQUIRED", "eyJ9"),
    ]
    body = {"resource_id": "res_1", "method": "GET", "url": URL}
    check_request(twin.last, "POST /gates/challenge", "seller", body)


async def test_redeem_forwards_only_the_credentials(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(PAID))
    headers = {
        "PAYMENT-SIGNATURE": "eyJzaWc",
        "Authorization": "Bearer the-apps-own-login",
        "Cookie": "session=1",
        "X-Svc-Receipt": "rcpt_other",
    }
    answer = await twin.call(
        client, lambda c: c.gates.redeem("res_1", method="GET", url=URL, headers=headers)
    )
    assert isinstance(answer, svc.GateRedemption) and answer.paid and answer.rail == "x402"
    assert isinstance(answer.verification, svc.ReceiptVerification)
    assert answer.verification.amount == Decimal("0.25")
    assert answer.headers == [("Payment-Receipt", "eyJy"), ("PAYMENT-RESPONSE", "eyJz")]
    sent = json.loads(twin.last.content)
    assert sent["headers"] == {"payment-signature": "eyJzaWc"}
    assert twin.last.url.path == "/gates/redeem"


async def test_an_mpp_credential_is_forwarded_and_a_refusal_read(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(REFUSED))
    answer = await twin.call(
        client,
        lambda c: c.gates.redeem(
            "res_1", method="GET", url=URL, headers={"authorization": "Payment eyJjcmVk"}
        ),
    )
    assert not answer.paid and answer.reason == "receipt_refused" and answer.verification is None
    assert "already been used" in (answer.message or "")
    assert json.loads(twin.last.content)["headers"] == {"authorization": "Payment eyJjcmVk"}


async def test_settle_and_release_send_the_claim(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(ok(PAID))
    paid = await twin.call(client, lambda c: c.gates.settle("clm_1"))
    assert isinstance(paid, svc.GateRedemption) and paid.paid
    check_request(twin.last, "POST /gates/settle", "seller", {"claim": "clm_1"})
    twin.reply(ok({"released": True, "claim": "clm_1"}))
    released = await twin.call(client, lambda c: c.gates.release("clm_1", status=500))
    assert isinstance(released, svc.GateRelease) and released.released
    body = {"claim": "clm_1", "reason": "answer_failed", "status": 500}
    check_request(twin.last, "POST /gates/release", "seller", body)
    await twin.raises(client, lambda c: c.gates.release("clm_1", reason="whatever"), ValueError)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.gates.challenge("res_1", method="GET", url="/v1/report"),
        lambda c: c.gates.challenge("res_1", method="GET", url="ftp://shop.example/x"),
        lambda c: c.gates.challenge("res_1", method="GET /x", url=URL),
        lambda c: c.gates.challenge("", method="GET", url=URL),
        lambda c: c.gates.redeem("res_1", method="GET", url=URL, headers={}),
        lambda c: c.gates.redeem(
            "res_1", method="GET", url=URL, headers={"Authorization": "Bearer x"}
        ),
    ],
)
async def test_bad_arguments_fail_before_sending(twin: Twin, call: Any) -> None:
    await twin.refuses(twin.client(seller_key=SELLER_KEY), call, ValueError)


async def test_errors_map_to_the_sdk_classes(twin: Twin) -> None:
    client = twin.client(seller_key=SELLER_KEY)
    twin.reply(fail(400, "invalid_rail_request", "Invalid request: url must be absolute."))
    with pytest.raises(svc.BadRequestError) as raised:
        await twin.call(client, lambda c: c.gates.challenge("res_1", method="GET", url=URL))
    assert raised.value.code == "invalid_rail_request"


async def test_a_seller_key_is_needed(twin: Twin) -> None:
    client = twin.client(wallet_key="svc_vw_test_wallet")
    with pytest.raises(svc.ConfigurationError):
        await twin.call(client, lambda c: c.gates.challenge("res_1", method="GET", url=URL))

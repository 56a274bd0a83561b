"""``POST /gates/challenge`` and ``POST /gates/redeem``: what ``svc_asgi`` asks the service,
through the SDK and on the wire (auth, validation, the envelope, discovery)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from x402.http.clients.httpx import x402AsyncTransport

import svc

from ..support import LiveServer, new_account
from .helpers import (
    PRICE,
    Capture,
    RailShop,
    balance,
    decode,
    fresh_credential,
    funded_payer,
    open_rail_shop,
    receipts_of,
    untimed,
    x402_client,
)

pytestmark = pytest.mark.anyio
APP_URL = "https://shop.example/v1/report?x=1"


def test_challenge_through_the_sdk(server: LiveServer, shop: RailShop) -> None:
    answer = shop.seller.gates.challenge(shop.resource.id, method="get", url=APP_URL)
    names = [name for name, _ in answer.headers]
    assert names == ["WWW-Authenticate", "PAYMENT-REQUIRED"] and answer.request_id
    x402 = decode(dict(answer.headers)["PAYMENT-REQUIRED"])
    assert x402["resource"]["url"] == APP_URL
    assert x402["accepts"][0]["amount"] == str(PRICE)

    off = open_rail_shop(server, enable=False)  # another account: its own origin
    other_url = "https://other-shop.example/v1/report"
    assert off.seller.gates.challenge(off.resource.id, method="GET", url=other_url).headers == []


async def test_redeem_through_the_sdk(
    server: LiveServer, shop: RailShop, payer: LocalAccount
) -> None:
    # The payer answers the challenge the service issued for the app's URL.
    challenge = shop.seller.gates.challenge(shop.resource.id, method="GET", url=APP_URL)
    app = httpx.MockTransport(
        lambda request: httpx.Response(402, headers=challenge.headers, json={"ok": False})
    )
    credential = await _credential_from(app, payer)

    # Verified and claimed: nothing moves until the claim is settled.
    held = shop.seller.gates.redeem(shop.resource.id, method="GET", url=APP_URL, headers=credential)
    assert not held.paid and held.claim and held.rail == "x402" and held.headers == []
    assert held.verification is not None and held.verification.valid
    assert balance(server.url, payer.address) == 1_000_000
    # A replay while it is claimed: refused, no challenge (never invite a second payment).
    during = shop.seller.gates.redeem(
        shop.resource.id, method="GET", url=APP_URL, headers=credential
    )
    assert not during.paid and during.claim is None and during.headers == []

    paid = shop.seller.gates.settle(held.claim)
    assert paid.paid and paid.rail == "x402" and paid.verification is not None
    assert paid.verification.valid and paid.verification.amount == Decimal("0.25")
    assert paid.verification.receipt_id == held.verification.receipt_id
    assert {name for name, _ in paid.headers} == {
        "Payment-Receipt",
        "PAYMENT-RESPONSE",
        "X-Svc-Receipt-Token",
    }
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    # Settling again (a retry after a lost answer) answers the same payment, moving nothing.
    retried = shop.seller.gates.settle(held.claim)
    assert retried.paid and retried.verification is not None
    assert retried.verification.receipt_id == paid.verification.receipt_id
    # The same answer, but for the receipt token: a fresh one (a new lifetime from now,
    # as GET /receipts/{id}/token gives) for the same receipt.
    assert untimed(retried.headers) == untimed(paid.headers)
    assert balance(server.url, payer.address) == 1_000_000 - PRICE

    again = shop.seller.gates.redeem(
        shop.resource.id, method="GET", url=APP_URL, headers=credential
    )
    assert not again.paid and again.reason == "receipt_refused" and again.headers == []
    assert again.message and "already been used" in again.message

    # The same credential for another URL: refused, with a fresh challenge to pay there.
    elsewhere = funded_payer(server)
    other = await _credential_from(app, elsewhere)
    moved = shop.seller.gates.redeem(
        shop.resource.id, method="GET", url="https://shop.example/v1/other", headers=other
    )
    assert not moved.paid and moved.reason == "receipt_refused"
    assert {name for name, _ in moved.headers} == {"WWW-Authenticate", "PAYMENT-REQUIRED"}
    assert balance(server.url, elsewhere.address) == 1_000_000


async def _credential_from(app: httpx.MockTransport, payer: object) -> dict[str, str]:
    """x402's client signing against a 402 served by ``app`` (no network)."""
    captured: dict[str, str] = {}

    class Wire(Capture):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if "payment-signature" in request.headers:
                captured["payment-signature"] = request.headers["payment-signature"]
                return httpx.Response(599, request=request)
            return app.handle_request(request)

    transport = x402AsyncTransport(x402_client(payer), transport=Wire())  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport) as http:
        await http.get(APP_URL)
    return captured


async def test_concurrent_redeems_through_the_api_pay_once(
    server: LiveServer, shop: RailShop, payer: LocalAccount
) -> None:
    credential = await fresh_credential(shop.resource.gate_url, payer, "mpp")
    async with svc.AsyncClient(base_url=server.url, seller_key=shop.seller_key) as seller:
        answers = await asyncio.gather(
            *(
                seller.gates.redeem(
                    shop.resource.id, method="GET", url=shop.resource.gate_url, headers=credential
                )
                for _ in range(10)
            )
        )
        claims = [a.claim for a in answers if a.claim is not None]
        assert len(claims) == 1  # one claim; the nine others are refused
        settled = await asyncio.gather(
            *(seller.gates.settle(claims[0]) for _ in range(5)), return_exceptions=True
        )
    # Settled once; every concurrent settle answers that same payment.
    assert all(isinstance(a, svc.GateRedemption) and a.paid for a in settled), settled
    assert len({a.verification.receipt_id for a in settled}) == 1  # type: ignore[union-attr]
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert balance(server.url, payer.address) == 1_000_000 - PRICE


async def test_released_claim_moves_nothing_and_may_be_presented_again(
    server: LiveServer, shop: RailShop, payer: LocalAccount
) -> None:
    credential = await fresh_credential(shop.resource.gate_url, payer, "x402")
    seller = shop.seller
    url = shop.resource.gate_url
    held = seller.gates.redeem(shop.resource.id, method="GET", url=url, headers=credential)
    assert held.claim
    released = seller.gates.release(held.claim, status=500)
    assert released.released and released.claim == held.claim
    with pytest.raises(svc.NotFoundError):  # released once: nothing left to settle
        seller.gates.settle(held.claim)
    assert balance(server.url, payer.address) == 1_000_000
    assert receipts_of(server, shop.resource.id) == []
    # The authorization is unspent: presented again, it pays once.
    again = seller.gates.redeem(shop.resource.id, method="GET", url=url, headers=credential)
    assert again.claim and seller.gates.settle(again.claim).paid
    assert balance(server.url, payer.address) == 1_000_000 - PRICE


def test_auth_and_ownership(server: LiveServer, shop: RailShop) -> None:
    body = {"resource_id": shop.resource.id, "method": "GET", "url": APP_URL}
    url = server.url + "/gates/challenge"
    r = httpx.post(url, json=body)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated"
    assert r.json()["request_id"] == r.headers["x-request-id"]
    wallet = new_account(server.url)
    r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {wallet.wallet_key}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_credential"
    stranger = new_account(server.url)
    r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {stranger.seller_key}"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = httpx.post(
        server.url + "/api/gates/challenge",
        json=body,
        headers={"Authorization": f"Bearer {shop.seller_key}"},
    )
    assert r.status_code == 200 and r.json()["ok"] is True and "x-ratelimit-limit" in r.headers


@pytest.mark.parametrize(
    ("path", "change", "field"),
    [
        ("/gates/challenge", {"url": "/v1/report"}, "url"),
        ("/gates/challenge", {"url": "ftp://shop.example/x"}, "url"),
        ("/gates/challenge", {"url": "https:///nohost"}, "url"),
        ("/gates/challenge", {"method": "GET /x"}, "method"),
        ("/gates/challenge", {"resource_id": 7}, "resource_id"),
        ("/gates/challenge", {"extra": 1}, "extra"),
        ("/gates/redeem", {"headers": {"Authorization": "Bearer x"}}, "headers.Authorization"),
        ("/gates/redeem", {"headers": {"Cookie": "a=b"}}, "headers.Cookie"),
        ("/gates/redeem", {"headers": {}}, "headers"),
        ("/gates/redeem", {"headers": {"PAYMENT-SIGNATURE": 5}}, "headers.PAYMENT-SIGNATURE"),
        # Found by schemathesis (a 500): header values must be what HTTP carries, as the
        # input boundary demands of the credential headers a gate receives.
        (
            "/gates/redeem",
            {"headers": {"PAYMENT-SIGNATURE": "\u00f7"}},
            "headers.PAYMENT-SIGNATURE",
        ),
        (
            "/gates/redeem",
            {"headers": {"Authorization": "Payment \u00e9"}},
            "headers.Authorization",
        ),
    ],
)
def test_bad_input_is_a_400_in_the_envelope(
    server: LiveServer, shop: RailShop, path: str, change: dict[str, object], field: str
) -> None:
    body: dict[str, object] = {"resource_id": shop.resource.id, "method": "GET", "url": APP_URL}
    if path.endswith("redeem"):
        body["headers"] = {"PAYMENT-SIGNATURE": "abc"}
    body.update(change)
    r = httpx.post(
        server.url + path, json=body, headers={"Authorization": f"Bearer {shop.seller_key}"}
    )
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_rail_request"
    assert field in [e["field"] for e in error["details"]["errors"]]
    r = httpx.post(
        server.url + path,
        content=b"[1]",
        headers={"Authorization": f"Bearer {shop.seller_key}", "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_a_deactivated_resource_is_not_redeemed(shop: RailShop) -> None:
    shop.seller.resources.deactivate(shop.resource.id)
    assert shop.seller.gates.challenge(shop.resource.id, method="GET", url=APP_URL).headers == []
    with pytest.raises(svc.ConflictError) as raised:
        shop.seller.gates.redeem(
            shop.resource.id, method="GET", url=APP_URL, headers={"PAYMENT-SIGNATURE": "x"}
        )
    assert raised.value.code == "resource_inactive"


def test_a_garbled_credential_is_malformed(shop: RailShop) -> None:
    answer = shop.seller.gates.redeem(
        shop.resource.id, method="GET", url=APP_URL, headers={"PAYMENT-SIGNATURE": "!!notb64"}
    )
    assert not answer.paid and answer.reason == "receipt_malformed" and answer.rail == "x402"
    r = httpx.get(shop.resource.gate_url, headers={"Authorization": "Payment garbage"})
    assert r.status_code == 402
    assert r.json()["error"]["details"]["reason"] == "receipt_malformed"
    assert "www-authenticate" in r.headers  # a fresh challenge to pay properly


def test_the_routes_are_in_the_discovery_documents(server: LiveServer) -> None:
    llms = httpx.get(server.url + "/llms.txt").text
    assert "POST /gates/challenge (auth: seller)" in llms
    assert "POST /gates/redeem (auth: seller)" in llms
    paths = httpx.get(server.url + "/agent-openapi.json").json()["paths"]
    assert paths["/gates/redeem"]["post"]["security"] == [{"seller": []}]
    full = httpx.get(server.url + "/llms-full.txt").text
    assert "invalid_rail_request (400)" in full and "settlement_unavailable (503)" in full

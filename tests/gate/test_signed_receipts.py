"""Signed receipt tokens at a PaymentGate on uvicorn, against a real reference server that
is then stopped: a valid token is still served (no round trip), a forged one (another
key) and an expired one are refused with a 402 naming why; a receipt id cannot be
checked any more (503)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reference_server import receipt_tokens
from svc.receipts import RECEIPT_TOKEN_ALGORITHM, verify

from ..support import LiveApp, LiveServer
from .support import CountingTransport, open_shop, seller_client
from .test_http import gate

pytestmark = pytest.mark.timeout(120)


def _forged(token: str) -> str:
    """The token's claims and ``kid``, signed with a key that is not the service's."""
    claims = jwt.decode(token, options={"verify_signature": False})
    kid = jwt.get_unverified_header(token)["kid"]
    other = Ed25519PrivateKey.generate()
    return jwt.encode(claims, other, algorithm=RECEIPT_TOKEN_ALGORITHM, headers={"kid": kid})


def _refusal(r: httpx.Response) -> dict[str, object]:
    assert r.status_code == 402, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == "payment_required"
    details: dict[str, object] = body["error"]["details"]
    assert details["reason"] == "receipt_refused"
    return details


def test_a_gate_serves_signed_receipts_with_the_service_stopped(
    make_server: Callable[..., LiveServer], serve_app: Callable[..., LiveApp]
) -> None:
    server = make_server()
    shop = open_shop(server)
    paid = shop.agent.pay(resource_id=shop.resource.id)
    token = paid.receipt_token
    assert token is not None and token.count(".") == 2
    other = shop.agent.pay(resource_id=shop.resource.id)  # presented by id, later
    resource = shop.resource
    expired = receipt_tokens.issue(
        server.ctx,
        server.ctx.now() - receipt_tokens.LIFETIME - timedelta(seconds=5),
        receipt_id=paid.receipt_id,
        environment="test",
        amount=resource.amount,
        rail="rill",
        resource_id=resource.id,
        seller_id=resource.seller_id,
    )
    transport = CountingTransport()
    client = seller_client(server.url, shop.seller_key, transport)
    app = serve_app(gate(shop, server, client=client, cache_ttl=0))
    url = app.url + "/v1/report"

    # First sight, the service up: the gate fetches the keys once, asks nothing else.
    first = httpx.get(url, headers={"X-Svc-Receipt": token})
    assert first.status_code == 200, first.text
    assert first.json()["paid"] is True and first.json()["receipt_id"] == paid.receipt_id
    assert transport.count("GET /.well-known/jwks.json") == 1
    assert transport.count("POST /access/verify") == 0

    server.stop()
    # A receipt id needs the service: 503.  A token does not: served.
    by_id = httpx.get(url, headers={"X-Svc-Receipt": other.receipt_id})
    assert by_id.status_code == 503, by_id.text
    again = httpx.get(url, headers={"X-Svc-Receipt": token})
    assert again.status_code == 200, again.text
    assert again.headers["x-svc-receipt"] == paid.receipt_id

    forged = _refusal(httpx.get(url, headers={"X-Svc-Receipt": _forged(token)}))
    assert forged["refused_because"] == "forged"
    late = _refusal(httpx.get(url, headers={"X-Svc-Receipt": expired}))
    assert late["refused_because"] == "expired"
    tampered = token.rsplit(".", 1)[0] + ".AAAA"
    assert _refusal(httpx.get(url, headers={"X-Svc-Receipt": tampered}))["refused_because"] == (
        "forged"
    )


def test_a_token_for_another_resource_is_refused(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = open_shop(server)
    elsewhere = shop.seller.resources.create(kind="http", path="/v1/other", amount="0.01")
    token = shop.agent.pay(resource_id=elsewhere.id).receipt_token
    assert token is not None
    app = serve_app(gate(shop, server))
    r = httpx.get(app.url + "/v1/report", headers={"X-Svc-Receipt": token})
    assert _refusal(r)["refused_because"] == "wrong_resource"


def test_jwks_lists_the_keys_and_a_rotation_keeps_old_tokens_valid(server: LiveServer) -> None:
    shop = open_shop(server)
    before = shop.agent.pay(resource_id=shop.resource.id)
    assert before.receipt_token is not None
    r = httpx.get(server.url + "/.well-known/jwks.json")
    assert r.status_code == 200 and "public" in r.headers["cache-control"]
    keys = r.json()["keys"]
    assert len(keys) == 2  # test and live
    assert all(k["kty"] == "OKP" and k["crv"] == "Ed25519" for k in keys)
    assert all(k["use"] == "sig" and k["alg"] == "EdDSA" and "d" not in k for k in keys)
    old_kid = jwt.get_unverified_header(before.receipt_token)["kid"]

    with server.ctx.db.write() as conn:
        new_kid = receipt_tokens.rotate(server.ctx, conn, "test")
    after = shop.agent.pay(resource_id=shop.resource.id)
    assert after.receipt_token is not None
    assert jwt.get_unverified_header(after.receipt_token)["kid"] == new_kid != old_kid
    jwks = shop.agent.jwks()
    assert {old_kid, new_kid} <= {k["kid"] for k in jwks.keys}
    for paid in (before, after):
        assert paid.receipt_token is not None
        proven = verify(paid.receipt_token, jwks, resource_id=shop.resource.id)
        assert proven.receipt_id == paid.receipt_id and proven.amount == shop.resource.amount
    # Once every token the old key signed has expired, it is no longer published.
    later = server.ctx.now() + receipt_tokens.LIFETIME + timedelta(seconds=1)
    published = receipt_tokens.published(server.ctx, later)["keys"]
    assert old_kid not in {k["kid"] for k in published}


def test_get_receipt_returns_a_fresh_token(server: LiveServer) -> None:
    shop = open_shop(server)
    paid = shop.agent.pay(resource_id=shop.resource.id)
    for reader in (shop.agent, shop.seller):
        receipt = reader.receipts.get(paid.receipt_id)
        assert receipt.receipt_token is not None
        proven = verify(receipt.receipt_token, shop.agent.jwks())
        assert proven.receipt_id == paid.receipt_id
        assert proven.seller_id == shop.resource.seller_id

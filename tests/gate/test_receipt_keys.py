"""The gate's receipt keys (svc_asgi._keys.KeySet) and ``svc.receipts.verify``, with no
server: a token signed by the published key is proven offline; a new ``kid`` fetches the
set again, at most once per interval; the keys are kept when the service is down; and
every way a token fails names its reason; a metered resource's token is asked online."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import attrs
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

import svc
from svc.receipts import RECEIPT_TOKEN_ALGORITHM, ReceiptTokenError, verify
from svc_asgi import GateCore, Refusal
from svc_asgi._keys import REFRESH_INTERVAL, KeySet

from .test_units import FakeBackend


def _jwk(private: Ed25519PrivateKey, kid: str) -> dict[str, str]:
    public = json.loads(OKPAlgorithm.to_jwk(private.public_key()))
    return {**public, "kid": kid, "use": "sig", "alg": "EdDSA"}


def _token(private: Ed25519PrivateKey, kid: str, **claims: object) -> str:
    now = int(time.time())
    body = {
        "receipt_id": "rcpt_1",
        "resource_id": "res_report",
        "seller_id": "sel_1",
        "amount": "0.05",
        "currency": "USD",
        "rail": "rill",
        "environment": "test",
        "tx_hash": None,
        "iat": now,
        "exp": now + 60,
        **claims,
    }
    return jwt.encode(body, private, algorithm=RECEIPT_TOKEN_ALGORITHM, headers={"kid": kid})


def _reason(token: str, jwks: svc.Jwks, **kwargs: object) -> str:
    with pytest.raises(ReceiptTokenError) as raised:
        verify(token, jwks, **kwargs)  # type: ignore[arg-type]
    assert isinstance(raised.value, svc.SvcError)
    return raised.value.reason


def test_verify_proves_a_token_and_names_every_failure() -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    jwks = svc.Jwks(keys=[_jwk(key, "k1")])
    proven = verify(_token(key, "k1"), jwks, resource_id="res_report")
    assert (proven.receipt_id, proven.amount, proven.kid) == ("rcpt_1", Decimal("0.05"), "k1")
    assert _reason(_token(other, "k1"), jwks) == "forged"
    assert _reason(_token(key, "k2"), jwks) == "unknown_kid"
    assert _reason(_token(key, "k1", exp=int(time.time()) - 1), jwks) == "expired"
    assert _reason(_token(key, "k1"), jwks, resource_id="res_other") == "wrong_resource"
    assert _reason("not.a.token", jwks) == "forged"
    # Signed, but not by the service's rules (an amount that is no amount): refused.
    assert _reason(_token(key, "k1", amount="lots"), jwks) == "forged"


@pytest.mark.anyio
async def test_keys_are_fetched_once_refreshed_on_a_new_kid_and_kept_when_down() -> None:
    first, second = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    backend = FakeBackend(jwks=svc.Jwks(keys=[_jwk(first, "k1")]))
    now = [1000.0]
    keys = KeySet(backend, clock=lambda: now[0])

    for _ in range(3):
        assert (await keys.verify(_token(first, "k1"), "res_report")).kid == "k1"
    assert backend.jwks_fetches == 1

    # A rotation: the new kid is fetched at most once per interval (forged kids included).
    backend.keys = svc.Jwks(keys=[_jwk(second, "k2"), _jwk(first, "k1")])
    now[0] += REFRESH_INTERVAL
    assert (await keys.verify(_token(second, "k2"), None)).kid == "k2"
    with pytest.raises(ReceiptTokenError):
        await keys.verify(_token(second, "k3"), None)
    with pytest.raises(ReceiptTokenError):
        await keys.verify(_token(second, "k4"), None)
    assert backend.jwks_fetches == 2

    # The service down: a refresh fails, the keys it had still prove tokens.
    backend.down = True
    now[0] += REFRESH_INTERVAL
    with pytest.raises(ReceiptTokenError):
        await keys.verify(_token(second, "k5"), None)
    assert backend.jwks_fetches == 3
    assert (await keys.verify(_token(first, "k1"), None)).receipt_id == "rcpt_1"


class MeteredBackend(FakeBackend):
    """Sells ``res_tokens`` by the token: a metered resource."""

    async def describe(self, resource_id: str) -> svc.Resource:
        fixed = await super().describe(resource_id)
        return attrs.evolve(
            fixed, pricing="metered", unit_price=Decimal("0.0001"), max_amount=Decimal("0.05")
        )


@pytest.mark.anyio
async def test_a_metered_resource_s_token_is_checked_online() -> None:
    """Single use (captured once by the service), so never decided offline: the token's
    signature is checked, then its receipt id asked of the service."""
    key = Ed25519PrivateKey.generate()
    backend = MeteredBackend(jwks=svc.Jwks(keys=[_jwk(key, "k1")]))
    core = GateCore(backend)
    token = _token(key, "k1", receipt_id="rcpt_good_m", resource_id="res_tokens")
    await core.check("res_tokens", {"x-svc-receipt": token})
    assert backend.verified == [("rcpt_good_m", "res_tokens")]
    forged = _token(Ed25519PrivateKey.generate(), "k1", resource_id="res_tokens")
    refused = await core.check("res_tokens", {"x-svc-receipt": forged})
    assert isinstance(refused, Refusal) and refused.extra["refused_because"] == "forged"
    assert len(backend.verified) == 1  # a forged token never reaches the service

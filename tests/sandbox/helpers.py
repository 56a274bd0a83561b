"""Signing EIP-3009 authorizations the way a client does, independently of the server.

The typed data comes from x402's client (its EIP-712 type tables) rather than from
``reference_server.sandbox``, so that a mistake in the server's hashing cannot cancel out in
the tests.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import httpx
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from x402.mechanisms.evm.types import AUTHORIZATION_TYPES, DOMAIN_TYPES

from reference_server.sandbox import chain
from reference_server.store import Database, upgrade

from ..support import serve_asgi

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
NETWORK = "eip155:84532"
DOMAIN = {"name": "USDC", "version": "2", "chainId": 84532, "verifyingContract": USDC}


@attrs.frozen(kw_only=True)
class Signed:
    """An authorization in x402 wire form with its signature."""

    authorization: dict[str, str]
    signature: str

    @property
    def payload(self) -> dict[str, Any]:
        return {"authorization": self.authorization, "signature": self.signature}


def authorization(
    payer: LocalAccount,
    to: str,
    value: int,
    *,
    valid_after: int = 0,
    valid_before: int | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    return {
        "from": payer.address,
        "to": to,
        "value": str(value),
        "validAfter": str(valid_after),
        "validBefore": str(valid_before or int(time.time()) + 600),
        "nonce": nonce or "0x" + secrets.token_hex(32),
    }


def sign(
    signer: LocalAccount, auth: dict[str, str], domain: dict[str, Any] | None = None
) -> Signed:
    """Sign ``auth`` (x402 wire form) with ``signer`` under ``domain`` (USDC by default)."""
    message = {
        "types": {**DOMAIN_TYPES, **AUTHORIZATION_TYPES},
        "primaryType": "TransferWithAuthorization",
        "domain": domain or DOMAIN,
        "message": {
            "from": auth["from"],
            "to": auth["to"],
            "value": int(auth["value"]),
            "validAfter": int(auth["validAfter"]),
            "validBefore": int(auth["validBefore"]),
            "nonce": auth["nonce"],
        },
    }
    signed = signer.sign_message(encode_typed_data(full_message=message))
    return Signed(authorization=dict(auth), signature="0x" + bytes(signed.signature).hex())


def new_account() -> LocalAccount:
    return Account.create()


def requirements(pay_to: str, amount: int) -> dict[str, Any]:
    """x402 v2 ``exact`` requirements for the sandbox token, as x402's server builds them."""
    return {
        "scheme": "exact",
        "network": NETWORK,
        "asset": USDC,
        "amount": str(amount),
        "payTo": pay_to,
        "maxTimeoutSeconds": 300,
        "extra": {"name": "USDC", "version": "2"},
    }


def x402_body(signed: Signed, pay_to: str | None = None, amount: int | None = None) -> dict:
    """A v2 ``/verify`` / ``/settle`` body, as ``HTTPFacilitatorClient`` sends it."""
    req = requirements(
        pay_to or signed.authorization["to"],
        int(signed.authorization["value"]) if amount is None else amount,
    )
    return {
        "x402Version": 2,
        "paymentPayload": {
            "x402Version": 2,
            "accepted": req,
            "payload": signed.payload,
            "resource": {"url": "http://127.0.0.1/paid"},
        },
        "paymentRequirements": req,
    }


def fund(base_url: str, address: str, amount: str) -> None:
    httpx.post(
        base_url + "/sandbox/faucet", json={"address": address, "amount": amount}
    ).raise_for_status()


def balance(base_url: str, address: str) -> int:
    r = httpx.get(f"{base_url}/sandbox/balances/{address}")
    r.raise_for_status()
    return int(r.json()["balance_atomic"])


def transaction(base_url: str, tx_hash: str) -> dict[str, Any]:
    r = httpx.get(f"{base_url}/sandbox/transactions/{tx_hash}")
    r.raise_for_status()
    return dict(r.json())


def get(url: str, **headers: str) -> httpx.Response:
    """A plain GET without payment (async tests use it for unpaid probes and replays)."""
    return httpx.get(url, headers=headers)


@contextmanager
def migrated(database_url: str) -> Iterator[Database]:
    db = Database(database_url)
    upgrade(db)
    try:
        yield db
    finally:
        db.dispose()


def assert_chain_sound(db: Database) -> None:
    with db.read() as conn:
        problems = chain.audit(conn)
    assert problems == [], problems


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI app (a seller's server in the interop tests) on loopback; yield its URL."""
    live = serve_asgi(app)
    try:
        yield live.url
    finally:
        live.stop()


class Recording(httpx.AsyncHTTPTransport):
    """The wire under x402's transport: keeps the requests it sends (with their headers)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await super().handle_async_request(request)

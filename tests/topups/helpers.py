"""Top-up set-ups: an owner, and the official clients paying ``POST /owners/me/top-ups``."""

from __future__ import annotations

from typing import Any

import httpx
from eth_account.signers.local import LocalAccount
from mpp.client import Mpp as MppClient
from mpp.methods.evm import BASE_SEPOLIA_USDC
from mpp.methods.evm import client as mpp_evm_client
from x402.http.clients import x402HttpxClient

from ..rails.helpers import x402_client

PATH = "/owners/me/top-ups"


def owner_headers(jwt: str, environment: str = "test", **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {jwt}", "X-Svc-Environment": environment, **extra}


async def x402_top_up(
    base: str, jwt: str, payer: LocalAccount, amount: str, *, client: Any = None, **extra: str
) -> httpx.Response:
    """x402's own httpx client paying the top-up's 402."""
    async with x402HttpxClient(client or x402_client(payer)) as http:
        return await http.post(
            base + PATH, json={"amount": amount}, headers=owner_headers(jwt, **extra)
        )


async def mpp_top_up(base: str, jwt: str, payer: LocalAccount, amount: str) -> httpx.Response:
    """pympp's client paying with ``Authorization: Payment``; the owner JWT rides in
    ``X-Svc-Owner-JWT`` since the Authorization header carries the credential."""
    charge = mpp_evm_client.charge(currency=BASE_SEPOLIA_USDC, account=payer)
    async with MppClient(methods=[charge]) as client:
        return await client.fetch(
            base + PATH,
            method="POST",
            json={"amount": amount},
            headers={"X-Svc-Owner-JWT": jwt, "X-Svc-Environment": "test"},
        )

"""Top-up set-ups: an owner, and the official clients paying ``POST /owners/me/top-ups``."""

from __future__ import annotations

from decimal import Decimal

import httpx
from eth_account.signers.local import LocalAccount
from mpp.client import Mpp as MppClient
from mpp.methods.evm import BASE_SEPOLIA_USDC
from mpp.methods.evm import client as mpp_evm_client

import svc
from reference_server.domain import ledger
from svc import RequestOptions
from svc._top_up_payer import payment_headers
from svc.money import to_micros

from ..support import LiveServer

PATH = "/owners/me/top-ups"


def owner_headers(jwt: str, environment: str = "test", **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {jwt}", "X-Svc-Environment": environment, **extra}


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


def owner_client(base: str, jwt: str, environment: str = "test") -> svc.Client:
    return svc.Client(base_url=base, owner_jwt=jwt, environment=environment, max_retries=0)  # type: ignore[arg-type]


def account_wallet(live: LiveServer, owner_id: str, environment: str) -> int:
    """The owner's account wallet (OWNER_WALLET) in micros, read from the ledger."""
    with live.ctx.db.read() as conn:
        return ledger.balance_micros(
            conn, environment=environment, kind=ledger.OWNER_WALLET, ref_id=owner_id
        )


def challenge_of(client: svc.Client, amount: str) -> svc.PaymentRequiredError:
    """The 402 a top-up of ``amount`` answers without a credential."""
    try:
        client.top_ups.create(amount)
    except svc.PaymentRequiredError as challenge:
        return challenge
    raise AssertionError("a top-up without a credential was not refused with 402")


def signed(challenge: svc.PaymentRequiredError, payer: LocalAccount, amount: str) -> dict[str, str]:
    """A ``PAYMENT-SIGNATURE`` for ``challenge``, signed as the SDK signs it (not sent)."""
    return payment_headers(challenge, payer, to_micros(Decimal(amount)))


def with_headers(headers: dict[str, str], key: str | None = None) -> RequestOptions:
    return RequestOptions(extra_headers=headers, idempotency_key=key)

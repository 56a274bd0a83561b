"""The sandbox facilitator under concurrent settles, on SQLite and PostgreSQL: a credential
pays once, no balance goes negative, and the chain's books stay consistent."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from ..support import LiveServer
from .helpers import (
    Signed,
    authorization,
    balance,
    fund,
    new_account,
    sign,
    transaction,
    x402_body,
)
from .test_routes import assert_chain_sound


async def settle_all(url: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """POST every body to ``/sandbox/x402/settle`` at once."""
    async with httpx.AsyncClient(timeout=120) as http:

        async def one(body: dict[str, Any]) -> dict[str, Any]:
            r = await http.post(url + "/sandbox/x402/settle", json=body)
            assert r.status_code == 200, r.text
            return dict(r.json())

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def outcomes(answers: list[dict[str, Any]]) -> Counter[str]:
    return Counter("settled" if a["success"] else a["errorReason"] for a in answers)


@pytest.mark.anyio
async def test_twenty_settles_of_one_authorization_pay_once(server: LiveServer) -> None:
    payer, payee = new_account(), new_account()
    fund(server.url, payer.address, "10")
    body = x402_body(sign(payer, authorization(payer, payee.address, 3_000_000)))

    answers = await settle_all(server.url, [body] * 20)

    assert outcomes(answers) == Counter({"settled": 1, "invalid_exact_evm_nonce_already_used": 19})
    [tx] = {a["transaction"] for a in answers if a["success"]}
    assert all(tx in a["errorMessage"] for a in answers if not a["success"])
    assert balance(server.url, payer.address) == 7_000_000
    assert balance(server.url, payee.address) == 3_000_000
    assert transaction(server.url, tx)["value"] == "3000000"
    assert_chain_sound(server)


@pytest.mark.anyio
async def test_thirty_authorizations_against_a_balance_for_ten(server: LiveServer) -> None:
    payer, shop = new_account(), new_account()
    fund(server.url, payer.address, "10")
    signed: list[Signed] = [
        sign(payer, authorization(payer, shop.address, 1_000_000)) for _ in range(30)
    ]

    answers = await settle_all(server.url, [x402_body(s) for s in signed])

    assert outcomes(answers) == Counter(
        {"settled": 10, "invalid_exact_evm_insufficient_balance": 20}
    )
    assert balance(server.url, payer.address) == 0
    assert balance(server.url, shop.address) == 10_000_000
    # The refused ones spent no nonce: funded again, they pay (each exactly once).
    fund(server.url, payer.address, "20")
    refused = [x402_body(s) for s, a in zip(signed, answers, strict=True) if not a["success"]]
    assert outcomes(await settle_all(server.url, refused + refused)) == Counter(
        {"settled": 20, "invalid_exact_evm_nonce_already_used": 20}
    )
    assert balance(server.url, shop.address) == 30_000_000
    assert_chain_sound(server)


@pytest.mark.anyio
async def test_opposite_transfers_at_once_do_not_deadlock(server: LiveServer) -> None:
    alice, bob = new_account(), new_account()
    fund(server.url, alice.address, "20")
    fund(server.url, bob.address, "20")
    bodies = [
        x402_body(sign(a, authorization(a, b.address, 1_000_000)))
        for a, b in [(alice, bob), (bob, alice)] * 20
    ]

    answers = await settle_all(server.url, bodies)

    assert outcomes(answers) == Counter({"settled": 40})
    assert balance(server.url, alice.address) == balance(server.url, bob.address) == 20_000_000
    assert_chain_sound(server)

"""Metered resources on the open rails (issue 27): x402's own client signs an ``upto``
maximum at a metered resource's gate, the gate settles what the answer used.  On the
sandbox chain, on a real database (SQLite, or PostgreSQL with SVC_TEST_DATABASE_URL)."""

from __future__ import annotations

import asyncio
import re
import runpy
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from eth_account.signers.local import LocalAccount
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.http.clients.httpx import x402AsyncTransport
from x402.mechanisms.evm.upto import UptoEvmClientScheme

import svc
from reference_server.domain.payments import fee_for
from reference_server.sandbox.facilitator import FACILITATOR_ADDRESS
from svc_asgi import PaymentGate

from ..directory.helpers import directory
from ..support import Account, LiveApp, LiveServer
from ..support import new_account as new_service_account
from .helpers import (
    Capture,
    balance,
    decode,
    events_of,
    fresh_credential,
    funded_payer,
    mpp_pay,
    receipts_of,
    untimed,
)

pytestmark = pytest.mark.anyio
MAX = 500_000  # $0.50, the most one answer costs
UNIT = 100  # $0.0001 a token
FUNDS = 1_000_000


@attrs.frozen
class Shop:
    """A seller with payments enabled selling a metered resource."""

    account: Account
    seller: svc.Client
    resource_id: str


def metered_shop(
    server: LiveServer, fallback: str | None = None, upstream_url: str | None = None
) -> Shop:
    account = new_service_account(server.url, "test")
    seller = svc.Client(base_url=server.url, seller_key=account.seller_key, max_retries=0)
    seller.sellers.enable_payments()
    return Shop(account, seller, _metered(seller, fallback, upstream_url=upstream_url))


def _metered(
    seller: svc.Client,
    fallback: str | None = None,
    path: str = "/v1/chat",
    upstream_url: str | None = None,
) -> str:
    resource = seller.resources.create(
        kind="http",
        path=path,
        pricing="metered",
        unit_price="0.0001",
        unit="token",
        max_amount=Decimal("0.50"),
        fallback_amount=fallback,
        upstream_url=upstream_url,
        listed=True,
    )
    return resource.id


def _upstream(serve_app: Callable[..., LiveApp]) -> str:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"reply": "hello"})

    return serve_app(Starlette(routes=[Route("/chat", chat)])).url + "/chat"


def _gate_url(seller: svc.Client, resource_id: str) -> str:
    return seller.resources.get(resource_id).gate_url


async def upto_credential(url: str, payer: LocalAccount) -> dict[str, str]:
    """The ``PAYMENT-SIGNATURE`` x402's client (upto registered) signs for ``url``'s 402."""
    wire = Capture()
    client = x402Client().register("eip155:*", UptoEvmClientScheme(payer))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=x402AsyncTransport(client, transport=wire)) as http:
        await http.get(url)
    assert wire.credential is not None, "the client did not pay"
    return wire.credential


def _held(seller: svc.Client, resource_id: str, credential: dict[str, str]) -> str:
    url = _gate_url(seller, resource_id)
    held = seller.gates.redeem(resource_id, method="GET", url=url, headers=credential)
    assert held.claim and not held.paid, held
    assert held.verification is not None and held.verification.amount == Decimal("0.50")
    return held.claim


def _receipt(server: LiveServer, resource_id: str) -> Any:
    [receipt] = receipts_of(server, resource_id)
    return receipt


def test_the_challenge_offers_upto_and_a_fixed_rail_only_at_the_fallback(
    server: LiveServer,
) -> None:
    shop = metered_shop(server)
    seller, metered = shop.seller, shop.resource_id
    only = httpx.get(_gate_url(seller, metered))
    assert only.status_code == 402
    assert "WWW-Authenticate" not in only.headers  # no MPP without a fallback price
    [upto] = decode(only.headers["PAYMENT-REQUIRED"])["accepts"]
    assert (upto["scheme"], upto["amount"], upto["maxTimeoutSeconds"]) == ("upto", str(MAX), 600)
    assert upto["extra"]["facilitatorAddress"] == FACILITATOR_ADDRESS
    assert upto["extra"]["assetTransferMethod"] == "permit2"

    with_fallback = _metered(seller, "0.05", path="/v1/fallback")
    both = httpx.get(_gate_url(seller, with_fallback))
    assert "metered by the token on x402 upto; a fixed 0.05" in both.headers["WWW-Authenticate"]
    accepts = decode(both.headers["PAYMENT-REQUIRED"])["accepts"]
    assert [(a["scheme"], a["amount"]) for a in accepts] == [("upto", str(MAX)), ("exact", "50000")]

    rails = {e["id"]: e["rails"] for e in directory(server).json()["data"]}
    assert rails[metered] == ["x402", "rill"]
    assert rails[with_fallback] == ["x402", "mpp", "rill"]


async def test_settled_at_what_the_units_cost(server: LiveServer) -> None:
    shop = metered_shop(server)
    seller, resource_id = shop.seller, shop.resource_id
    payer = funded_payer(server)
    credential = await upto_credential(_gate_url(seller, resource_id), payer)
    claim = _held(seller, resource_id, credential)
    assert balance(server.url, payer.address) == FUNDS  # claimed: nothing moved yet

    paid = seller.gates.settle(claim, units=137)

    actual = 137 * UNIT
    assert paid.paid and paid.verification is not None
    assert paid.verification.amount == Decimal("0.0137")
    response = decode(dict(paid.headers)["PAYMENT-RESPONSE"])
    assert (response["success"], response["amount"]) == (True, str(actual))
    receipt = _receipt(server, resource_id)
    assert (receipt.amount_micros, receipt.units, receipt.max_amount_micros) == (actual, 137, MAX)
    assert receipt.status == "settled" and receipt.settled_at is not None
    assert receipt.tx_hash == response["transaction"].lower()
    assert balance(server.url, payer.address) == FUNDS - actual  # the actual amount only
    fee = fee_for(actual, server.ctx.settings.platform_fee_bps)
    assert seller.sellers.balance().balance == Decimal(actual - fee) / 1_000_000
    # Settling again (a retry after a lost answer): the same payment, nothing moves.
    again = seller.gates.settle(claim, units=137)
    assert again.paid and untimed(again.headers) == untimed(paid.headers)  # a fresh token
    assert balance(server.url, payer.address) == FUNDS - actual
    # Presented again: refused as used, with no challenge inviting a second payment.
    url = _gate_url(seller, resource_id)
    replay = seller.gates.redeem(resource_id, method="GET", url=url, headers=credential)
    assert not replay.paid and replay.claim is None and replay.headers == []
    assert replay.message and "already presented" in replay.message


async def test_zero_units_release_the_hold_and_charge_nothing(server: LiveServer) -> None:
    shop = metered_shop(server)
    seller, resource_id = shop.seller, shop.resource_id
    payer = funded_payer(server)
    credential = await upto_credential(_gate_url(seller, resource_id), payer)
    claim = _held(seller, resource_id, credential)

    released = seller.gates.settle(claim, units=0)

    assert not released.paid and released.reason == "released"
    assert released.message and "no usage was reported" in released.message
    assert receipts_of(server, resource_id) == []
    assert balance(server.url, payer.address) == FUNDS
    assert events_of(server, shop.account.owner_id, "payment.failed") == []  # nothing failed
    with pytest.raises(svc.NotFoundError):  # released: nothing left to settle
        seller.gates.settle(claim, units=1)
    # The authorization was never spent: it may be presented again.
    assert _held(seller, resource_id, credential)


async def test_units_above_the_maximum_are_capped(server: LiveServer) -> None:
    shop = metered_shop(server)
    seller, resource_id = shop.seller, shop.resource_id
    payer = funded_payer(server)
    claim = _held(seller, resource_id, await upto_credential(_gate_url(seller, resource_id), payer))

    paid = seller.gates.settle(claim, units=10_000)

    assert paid.paid and _receipt(server, resource_id).amount_micros == MAX
    assert balance(server.url, payer.address) == FUNDS - MAX


async def test_twenty_concurrent_settles_of_one_claim_settle_once(server: LiveServer) -> None:
    shop = metered_shop(server)
    seller, resource_id = shop.seller, shop.resource_id
    payer = funded_payer(server)
    claim = _held(seller, resource_id, await upto_credential(_gate_url(seller, resource_id), payer))
    async with svc.AsyncClient(base_url=server.url, seller_key=shop.account.seller_key) as client:
        answers = await asyncio.gather(
            *(client.gates.settle(claim, units=137) for _ in range(20)), return_exceptions=True
        )
    assert all(isinstance(a, svc.GateRedemption) and a.paid for a in answers), answers
    assert len({a.verification.receipt_id for a in answers}) == 1  # type: ignore[union-attr]
    assert len(receipts_of(server, resource_id)) == 1
    assert balance(server.url, payer.address) == FUNDS - 137 * UNIT


async def test_a_credential_for_one_resource_pays_nothing_at_another(server: LiveServer) -> None:
    shop = metered_shop(server)
    seller, first = shop.seller, shop.resource_id
    second = _metered(seller, path="/v1/other")
    payer = funded_payer(server)
    credential = await upto_credential(_gate_url(seller, first), payer)

    url = _gate_url(seller, second)
    refused = seller.gates.redeem(second, method="GET", url=url, headers=credential)

    assert not refused.paid and refused.claim is None and refused.reason == "receipt_refused"
    assert balance(server.url, payer.address) == FUNDS


async def test_the_hosted_gate_settles_upto_at_the_maximum_without_units(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    """A hosted gate reports no units (yet): it settles as a card captured without an
    amount, the maximum, and only after the upstream answered."""
    shop = metered_shop(server, upstream_url=_upstream(serve_app))
    payer = funded_payer(server)
    client = x402Client().register("eip155:*", UptoEvmClientScheme(payer))  # type: ignore[arg-type]
    async with x402HttpxClient(client) as http:
        paid = await http.get(_gate_url(shop.seller, shop.resource_id))

    assert paid.status_code == 200 and paid.json() == {"reply": "hello"}, paid.text
    receipt = _receipt(server, shop.resource_id)
    assert (receipt.amount_micros, receipt.units, receipt.max_amount_micros) == (MAX, None, MAX)
    assert balance(server.url, payer.address) == FUNDS - MAX


async def test_mpp_pays_the_fallback_price(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = metered_shop(server, fallback="0.05", upstream_url=_upstream(serve_app))
    payer = funded_payer(server)

    paid = await mpp_pay(_gate_url(shop.seller, shop.resource_id), payer)

    assert paid.status_code == 200, paid.text
    receipt = _receipt(server, shop.resource_id)
    assert (receipt.rail, receipt.amount_micros, receipt.units) == ("mpp", 50_000, None)
    assert balance(server.url, payer.address) == FUNDS - 50_000


async def test_units_for_a_fixed_price_are_refused(server: LiveServer) -> None:
    account = new_service_account(server.url, "test")
    seller = svc.Client(base_url=server.url, seller_key=account.seller_key, max_retries=0)
    seller.sellers.enable_payments()
    fixed = seller.resources.create(kind="http", path="/v1/report", amount="0.25")
    payer = funded_payer(server)
    credential = await fresh_credential(fixed.gate_url, payer, "x402")
    held = seller.gates.redeem(fixed.id, method="GET", url=fixed.gate_url, headers=credential)
    assert held.claim

    with pytest.raises(svc.BadRequestError) as refused:
        seller.gates.settle(held.claim, units=3)

    assert refused.value.code == "invalid_rail_request"
    assert refused.value.details["errors"] == [
        {"field": "units", "message": "the resource has a fixed price"}
    ]
    assert balance(server.url, payer.address) == FUNDS
    assert seller.gates.settle(held.claim).paid  # still held: settled without units


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "open_rails_metered.py"


def test_the_docs_example_runs_as_shown(
    server: LiveServer,
    serve_app: Callable[..., LiveApp],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/open-rails.md shows docs/examples/open_rails_metered.py verbatim, and paying a
    hosted metered gate (no upstream: no units, so the maximum) it prints what it says;
    behind svc_asgi, an app reporting 137 tokens, it pays 0.0137, as the page says."""
    doc = (EXAMPLE.parents[1] / "open-rails.md").read_text()
    [shown] = re.findall(
        r"<!-- example: docs/examples/open_rails_metered.py -->\n```python\n(.*?)```", doc, re.S
    )
    assert shown == EXAMPLE.read_text()
    shop = metered_shop(server)
    payer = funded_payer(server)
    monkeypatch.setenv("PAYER_KEY", payer.key.hex())
    monkeypatch.setenv("GATE_URL", _gate_url(shop.seller, shop.resource_id))
    runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines() == ["200 rcpt_", "0.5 USDC on eip155:84532"]
    assert balance(server.url, payer.address) == FUNDS - MAX

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"reply": "hello"}, headers={"X-Svc-Usage": "137"})

    gate = PaymentGate(
        Starlette(routes=[Route("/v1/chat", chat)]),
        service_url=server.url,
        seller_key=shop.account.seller_key,
        prices={"GET /v1/chat": shop.resource_id},
    )
    monkeypatch.setenv("GATE_URL", serve_app(gate).url + "/v1/chat")
    runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines() == ["200 rcpt_", "0.0137 USDC on eip155:84532"]

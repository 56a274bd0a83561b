"""Verify, serve, then settle (issue 14): the official x402 and pympp clients paying a
hosted gate whose upstream fails, and a ``svc_asgi`` route whose handler fails, are not
charged; the same with a success are charged once; a released credential presented again
settles once at most; concurrent replays of one credential settle once.  All on loopback,
on the sandbox chain (and on PostgreSQL with ``SVC_TEST_DATABASE_URL``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import svc
from reference_server.domain.open_rails import HOLD_TTL, expire_holds
from reference_server.sandbox import chain
from reference_server.sandbox.eip3009 import Authorization
from svc_asgi import PaymentGate, payment_of

from ..sandbox.helpers import assert_chain_sound, authorization, new_account, sign
from ..support import LiveApp, LiveServer, free_port
from .helpers import (
    PRICE,
    RailShop,
    balance,
    event_data,
    events_of,
    fresh_credential,
    funded_payer,
    mpp_pay,
    open_rail_shop,
    pay_with,
    receipts_of,
    x402_pay,
)

pytestmark = pytest.mark.anyio
PAYMENT_HEADERS = ("x-svc-receipt", "payment-receipt", "payment-response")


class Answers:
    """What the upstream (or the seller's handler) answers: ``status``, switchable."""

    def __init__(self, status: int, before: Callable[[], None] | None = None) -> None:
        self.status = status
        self.calls = 0
        self.before = before

    async def endpoint(self, request: Request) -> Response:
        self.calls += 1
        if self.before is not None:
            self.before()
        if self.status >= 400:
            return JSONResponse({"error": "boom", "status": self.status}, status_code=self.status)
        payment = payment_of(request)  # None upstream of a hosted gate
        receipt = payment.receipt_id if payment is not None else None
        return JSONResponse({"report": "the goods", "receipt_id": receipt})


def _surface(
    kind: str, server: LiveServer, serve_app: Callable[..., LiveApp], answers: Answers
) -> tuple[RailShop, str]:
    """A seller with payments enabled and the URL a payer pays: its hosted gate forwarding
    to an upstream answering ``answers``, or its own app behind ``svc_asgi``."""
    if kind == "hosted":
        upstream = serve_app(Starlette(routes=[Route("/work", answers.endpoint, methods=["GET"])]))
        shop = open_rail_shop(server, upstream_url=f"{upstream.url}/work")
        return shop, shop.resource.gate_url
    shop = open_rail_shop(server)
    app = PaymentGate(
        Starlette(routes=[Route("/v1/report", answers.endpoint, methods=["GET"])]),
        prices={"/v1/report": shop.resource.id},
        service_url=server.url,
        seller_key=shop.seller_key,
    )
    return shop, serve_app(app).url + "/v1/report"


def _unpaid_answer(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json() == {"error": "boom", "status": status}
    assert not [name for name in PAYMENT_HEADERS if name in answer.headers]


def _not_charged(server: LiveServer, shop: RailShop, payer: Any) -> None:
    assert balance(server.url, payer.address) == 1_000_000
    assert receipts_of(server, shop.resource.id) == []
    assert shop.balance().balance == Decimal("0")
    assert events_of(server, shop.owner_id, "payment.succeeded") == []


@pytest.mark.parametrize("kind", ["hosted", "asgi"])
async def test_a_failing_answer_is_not_charged(
    server: LiveServer, serve_app: Callable[..., LiveApp], kind: str, protocol: str
) -> None:
    answers = Answers(500)
    shop, url = _surface(kind, server, serve_app, answers)
    payer = funded_payer(server)

    _unpaid_answer(await pay_with(protocol, url, payer), 500)
    assert answers.calls == 1
    _not_charged(server, shop, payer)
    [failed] = events_of(server, shop.owner_id, "payment.failed")
    data = event_data(failed, svc.PaymentFailedData)
    assert (data.rail, data.reason, data.status, data.payer) == (
        protocol,
        "answer_failed",
        500,
        payer.address,
    )
    assert "500" in (data.message or "")
    assert_chain_sound(server.ctx.db)


@pytest.mark.parametrize("kind", ["hosted", "asgi"])
async def test_a_successful_answer_is_charged_once(
    server: LiveServer, serve_app: Callable[..., LiveApp], kind: str, protocol: str
) -> None:
    shop, url = _surface(kind, server, serve_app, Answers(200))
    payer = funded_payer(server)

    paid = await pay_with(protocol, url, payer)
    assert paid.status_code == 200, paid.text
    assert paid.json()["report"] == "the goods"
    [receipt] = receipts_of(server, shop.resource.id)
    assert paid.headers["x-svc-receipt"] == receipt.id and "payment-receipt" in paid.headers
    assert ("payment-response" in paid.headers) == (protocol == "x402")
    if kind == "asgi":  # the app was handed the receipt id the payment settled into
        assert paid.json()["receipt_id"] == receipt.id
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(events_of(server, shop.owner_id, "payment.succeeded")) == 1
    assert events_of(server, shop.owner_id, "payment.failed") == []
    assert_chain_sound(server.ctx.db)


@pytest.mark.parametrize("kind", ["hosted", "asgi"])
async def test_a_released_credential_settles_once_at_most(
    server: LiveServer, serve_app: Callable[..., LiveApp], kind: str, protocol: str
) -> None:
    answers = Answers(503)
    shop, url = _surface(kind, server, serve_app, answers)
    payer = funded_payer(server)
    credential = await fresh_credential(url, payer, protocol)

    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(2):  # released each time: never charged
            _unpaid_answer(await http.get(url, headers=credential), 503)
        _not_charged(server, shop, payer)

        answers.status = 200  # the upstream recovered: the same credential pays once
        paid = await http.get(url, headers=credential)
        assert paid.status_code == 200, paid.text
        again = await http.get(url, headers=credential)
    assert again.status_code == 402
    assert again.json()["error"]["details"]["reason"] == "receipt_refused"
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert len(receipts_of(server, shop.resource.id)) == 1
    assert answers.calls == 3
    reasons = [f["reason"] for f in events_of(server, shop.owner_id, "payment.failed")]
    assert reasons == ["answer_failed", "answer_failed", "receipt_refused"]
    assert_chain_sound(server.ctx.db)


@pytest.mark.parametrize("kind", ["hosted", "asgi"])
@pytest.mark.parametrize("status", [200, 500])
async def test_concurrent_replays_of_one_credential_settle_once(
    server: LiveServer, serve_app: Callable[..., LiveApp], kind: str, status: int
) -> None:
    answers = Answers(status)
    shop, url = _surface(kind, server, serve_app, answers)
    payer = funded_payer(server)
    credential = await fresh_credential(url, payer, "x402")

    async with httpx.AsyncClient(timeout=30) as http:
        replies = await asyncio.gather(*(http.get(url, headers=credential) for _ in range(8)))
    served = [r for r in replies if r.status_code != 402]
    # One claim at a time: the others are refused while it is held; a released claim may
    # be taken again by a later request, but a settled one never.
    assert served and all(r.status_code == status for r in served)
    if status == 200:
        assert len(served) == 1
        assert balance(server.url, payer.address) == 1_000_000 - PRICE
        assert len(receipts_of(server, shop.resource.id)) == 1
    else:
        _not_charged(server, shop, payer)
    assert answers.calls == len(served)
    assert_chain_sound(server.ctx.db)


async def test_a_claim_never_settled_expires_and_is_released(
    server: LiveServer, shop: RailShop, payer: LocalAccount
) -> None:
    """A gate that crashed between claim and settle: housekeeping releases the claim."""
    url = shop.resource.gate_url
    credential = await fresh_credential(url, payer, "mpp")
    held = shop.seller.gates.redeem(shop.resource.id, method="GET", url=url, headers=credential)
    assert held.claim
    ctx = server.ctx

    def expire(later: Any) -> int:
        return expire_holds(ctx.db, settings=ctx.settings, now=later, notify=lambda: None)

    assert expire(ctx.now()) == 0  # not yet
    assert expire(ctx.now() + HOLD_TTL + HOLD_TTL / 10) == 1
    with pytest.raises(svc.NotFoundError):
        shop.seller.gates.settle(held.claim)
    _not_charged(server, shop, payer)
    [failed] = events_of(server, shop.owner_id, "payment.failed")
    assert failed["reason"] == "claim_expired"
    # Released: the unspent authorization pays once when presented again.
    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.get(url, headers=credential)).status_code == 200
    assert balance(server.url, payer.address) == 1_000_000 - PRICE


@pytest.mark.parametrize("kind", ["hosted", "asgi"])
async def test_a_settlement_refused_after_success_withholds_the_answer(
    server: LiveServer, payer: LocalAccount, serve_app: Callable[..., LiveApp], kind: str
) -> None:

    def drain() -> None:
        """While the request is served, the payer spends everything elsewhere."""
        signed = sign(payer, authorization(payer, new_account().address, 1_000_000))
        auth = Authorization.from_json(signed.authorization)
        with server.ctx.db.write() as conn:
            chain.transfer_with_authorization(conn, auth, signed.signature, now=server.ctx.now())

    answers = Answers(200, before=drain)
    shop, url = _surface(kind, server, serve_app, answers)
    refused = await x402_pay(url, payer)
    assert refused.status_code == 402 and answers.calls == 1
    error = refused.json()["error"]
    assert error["details"]["reason"] == "receipt_refused"
    assert "could not be settled" in error["message"] and "the goods" not in refused.text
    assert not [name for name in PAYMENT_HEADERS if name in refused.headers]
    assert balance(server.url, payer.address) == 0  # drained elsewhere, not by the gate
    assert receipts_of(server, shop.resource.id) == []
    assert shop.balance().balance == Decimal("0")
    reasons = [f["reason"] for f in events_of(server, shop.owner_id, "payment.failed")]
    assert reasons == ["settlement_refused"]
    assert_chain_sound(server.ctx.db)


async def test_an_unreachable_upstream_is_not_charged(
    server: LiveServer, serve_app: Callable[..., LiveApp]
) -> None:
    shop = open_rail_shop(server, upstream_url=f"http://127.0.0.1:{free_port()}/gone")
    payer = funded_payer(server)
    answer = await mpp_pay(shop.resource.gate_url, payer)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "upstream_unavailable"
    _not_charged(server, shop, payer)
    [failed] = events_of(server, shop.owner_id, "payment.failed")
    assert (failed["reason"], failed["status"]) == ("answer_failed", 502)

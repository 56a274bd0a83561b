"""Verify, serve, then settle in ``svc_asgi``, in process: a claimed payment is settled
when the answer's status is below 400 (before its body streams), released otherwise,
released when the app raises or answers nothing, and a failed settlement withholds the
answer.  A fake :class:`HoldingRail` records what the gate asked."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import httpx
import pytest

import svc
from svc_asgi import HoldingRail, Offer, PaymentGate, RailRedemption, RailRequest, payment_of

from .test_units import FakeBackend

pytestmark = pytest.mark.anyio


class HoldingFake:
    """Claims ``PAYMENT-SIGNATURE: signed``; settles unless told to refuse."""

    name = "fake402"

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, ...]] = []

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        return [("PAYMENT-REQUIRED", "fresh")]

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        if headers.get("payment-signature") != "signed":
            return None
        self.calls.append(("claim",))
        return RailRedemption(verification=_verification(), source="x402", claim="clm_1")

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        self.calls.append(("settle", claim))
        if self.refuse:
            refused = svc.ReceiptVerification(valid=False, receipt_id="", reason="payer is short")
            return RailRedemption(verification=refused, source="x402")
        return RailRedemption(
            verification=_verification(),
            source="x402",
            response_headers=[("PAYMENT-RESPONSE", "settled")],
        )

    async def release(self, claim: str, *, reason: str, status: int | None) -> None:
        self.calls.append(("release", claim, reason, str(status)))


def _verification() -> svc.ReceiptVerification:
    return svc.ReceiptVerification(
        valid=True, receipt_id="rcpt_held", resource_id="res_report", amount=Decimal("0.05")
    )


def _app(status: int, *, raises: bool = False, silent: bool = False) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        payment = payment_of(scope)
        assert payment is not None and payment.receipt_id == "rcpt_held"
        if raises:
            raise RuntimeError("the handler crashed")
        if silent:
            return
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"part one,", "more_body": True})
        await send({"type": "http.response.body", "body": b"part two"})

    return app


async def _get(rail: HoldingFake, app: Any) -> httpx.Response:
    gate = PaymentGate(
        app, prices={"GET /v1/report": "res_report"}, backend=FakeBackend(), rails=[rail]
    )
    transport = httpx.ASGITransport(app=gate, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
        return await http.get("/v1/report", headers={"PAYMENT-SIGNATURE": "signed"})


def test_the_fake_is_a_holding_rail() -> None:
    assert isinstance(HoldingFake(), HoldingRail)


async def test_a_success_is_settled_before_its_body_streams() -> None:
    rail = HoldingFake()
    answer = await _get(rail, _app(200))
    assert answer.status_code == 200 and answer.text == "part one,part two"
    assert answer.headers["x-svc-receipt"] == "rcpt_held"
    assert answer.headers["payment-response"] == "settled"
    assert answer.headers["cache-control"] == "private"
    assert rail.calls == [("claim",), ("settle", "clm_1")]


@pytest.mark.parametrize("status", [400, 404, 500, 503])
async def test_a_failure_is_released_and_goes_back_as_it_is(status: int) -> None:
    rail = HoldingFake()
    answer = await _get(rail, _app(status))
    assert answer.status_code == status and answer.text == "part one,part two"
    assert "x-svc-receipt" not in answer.headers and "payment-response" not in answer.headers
    assert rail.calls == [("claim",), ("release", "clm_1", "answer_failed", str(status))]


async def test_an_app_that_raises_or_answers_nothing_releases() -> None:
    rail = HoldingFake()
    answer = await _get(rail, _app(200, raises=True))
    assert answer.status_code == 500
    assert rail.calls[-1] == ("release", "clm_1", "answer_failed", "500")
    rail = HoldingFake()
    with contextlib.suppress(AssertionError):  # httpx's transport insists on an answer
        await _get(rail, _app(200, silent=True))
    assert rail.calls[-1] == ("release", "clm_1", "answer_missing", "None")


async def test_a_failed_settlement_withholds_the_answer() -> None:
    rail = HoldingFake(refuse=True)
    answer = await _get(rail, _app(200))
    assert answer.status_code == 402
    error = answer.json()["error"]
    assert error["details"]["reason"] == "receipt_refused"
    assert "could not be settled" in error["message"] and "part one" not in answer.text
    assert "x-svc-receipt" not in answer.headers
    assert answer.headers["payment-required"] == "fresh"


async def _handshake(rail: HoldingFake, app: Any) -> list[dict[str, Any]]:
    """A WebSocket handshake with a rail credential, straight through the ASGI callable."""
    gate = PaymentGate(app, prices={"GET /ws": "res_report"}, backend=FakeBackend(), rails=[rail])
    scope = {
        "type": "websocket",
        "path": "/ws",
        "raw_path": b"/ws",
        "query_string": b"",
        "root_path": "",
        "scheme": "ws",
        "server": ("shop", 80),
        "headers": [(b"host", b"shop"), (b"payment-signature", b"signed")],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await gate(scope, receive, send)
    return sent


async def test_a_websocket_is_settled_on_accept_and_released_on_refusal() -> None:
    async def accepts(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1000})

    rail = HoldingFake()
    sent = await _handshake(rail, accepts)
    assert rail.calls == [("claim",), ("settle", "clm_1")]
    assert sent[0]["type"] == "websocket.accept"
    assert (b"payment-response", b"settled") in sent[0]["headers"]

    async def refuses(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.close", "code": 1008})

    rail = HoldingFake()
    sent = await _handshake(rail, refuses)
    assert rail.calls == [("claim",), ("release", "clm_1", "answer_failed", "403")]
    assert [m["type"] for m in sent] == ["websocket.close"]

    rail = HoldingFake(refuse=True)  # accepted, but the payment does not settle
    sent = await _handshake(rail, accepts)
    assert sent[0]["type"] == "websocket.close" and sent[0]["code"] == 1008
    assert len(sent) == 1  # the app's later close is dropped with the rest

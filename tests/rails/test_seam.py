"""The open-rails seam of ``svc_asgi`` in process: the request a rail sees, the hot path,
a failing challenge, refusals that bring their own headers, and the default rails."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest

import svc
from svc_asgi import (
    GateCore,
    Offer,
    Paid,
    PaymentGate,
    RailRedemption,
    RailRequest,
    Refusal,
    ServiceRails,
    payment_of,
)
from svc_asgi._asgi import credential_headers, request_url

from ..gate.test_units import FakeBackend

pytestmark = pytest.mark.anyio


def _scope(**overrides: Any) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "scheme": "https",
        "server": ("10.0.0.5", 8443),
        "path": "/v1/report",
        "raw_path": b"/v1/report",
        "root_path": "",
        "query_string": b"page=2&q=a%20b",
        "headers": [(b"host", b"shop.example")],
    }
    scope.update(overrides)
    return scope


def test_the_request_url_is_the_one_the_client_addressed() -> None:
    assert request_url(_scope()) == "https://shop.example/v1/report?page=2&q=a%20b"
    assert request_url(_scope(query_string=b"")) == "https://shop.example/v1/report"
    # No Host header: the server's own address.
    assert request_url(_scope(headers=[], query_string=b"")) == "https://10.0.0.5:8443/v1/report"
    # A proxy in front changes the scheme and host: the configured public origin wins.
    assert request_url(_scope(), "https://public.example/") == (
        "https://public.example/v1/report?page=2&q=a%20b"
    )
    # Without raw_path, the path is re-encoded (and keeps a mount's root_path).
    scope = _scope(raw_path=None, root_path="/shop", path="/shop/v1/a b", query_string=b"")
    assert request_url(scope) == "https://shop.example/shop/v1/a%20b"


def test_credentials_are_told_apart_from_logins() -> None:
    def headers(*pairs: tuple[bytes, bytes]) -> dict[str, Any]:
        return _scope(headers=list(pairs))

    assert credential_headers(headers((b"authorization", b"Bearer app"))) == (None, False)
    assert credential_headers(headers((b"authorization", b"Payment eyJ"))) == (None, True)
    assert credential_headers(headers((b"payment-signature", b"eyJ"))) == (None, True)
    found = credential_headers(headers((b"x-svc-receipt", b"rcpt_1"), (b"payment-receipt", b"x")))
    assert found == ((b"x-svc-receipt", b"rcpt_1"), False)


class ScriptedRail:
    """A rail whose answers a test scripts; it records what it was asked."""

    name = "scripted"

    def __init__(self, redemption: RailRedemption | None = None, *, broken: bool = False) -> None:
        self.redemption = redemption
        self.broken = broken
        self.challenged: list[RailRequest] = []
        self.redeemed: list[RailRequest] = []

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        self.challenged.append(request)
        if self.broken:
            raise RuntimeError("the rail's service is down")
        return [("PAYMENT-REQUIRED", f"challenge-for:{request.method} {request.url}")]

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        if "payment-signature" not in {k.lower() for k in headers}:
            return None
        self.redeemed.append(request)
        return self.redemption


REQUEST = RailRequest("GET", "https://shop.example/v1/report")


async def test_a_failing_challenge_never_breaks_the_402(caplog: pytest.LogCaptureFixture) -> None:
    broken, working = ScriptedRail(broken=True), ScriptedRail()
    core = GateCore(FakeBackend(), rails=[broken, working])
    with caplog.at_level(logging.WARNING, logger="svc_asgi"):
        outcome = await core.check("res_report", {}, request=REQUEST)
    assert isinstance(outcome, Refusal) and outcome.status == 402
    assert outcome.headers == (("PAYMENT-REQUIRED", "challenge-for:GET " + REQUEST.url),)
    assert outcome.body("req_1")["error"]["details"]["reason"] == "receipt_missing"
    assert "scripted challenge for res_report failed" in caplog.text


async def test_without_a_request_no_rail_is_asked() -> None:
    rail = ScriptedRail()
    core = GateCore(FakeBackend(), rails=[rail])
    outcome = await core.check("res_report", {"payment-signature": "x"})  # an MCP call
    assert isinstance(outcome, Refusal) and outcome.headers == ()
    assert rail.challenged == [] and rail.redeemed == []


async def test_a_refusal_brings_its_own_headers_and_reason() -> None:
    refused = svc.ReceiptVerification(valid=False, receipt_id="", reason="already used")
    replay = ScriptedRail(RailRedemption(verification=refused, challenge_headers=(), source="x402"))
    other = ScriptedRail()
    core = GateCore(FakeBackend(), rails=[replay, other])
    outcome = await core.check("res_report", {"PAYMENT-SIGNATURE": "sig"}, request=REQUEST)
    assert isinstance(outcome, Refusal)
    details = outcome.details()
    assert (details["reason"], details["rail"], details["refused_because"]) == (
        "receipt_refused",
        "x402",
        "already used",
    )
    assert "receipt_id" not in details
    assert replay.challenged == []  # its own (empty) headers stand: no new challenge
    assert [request.url for request in other.challenged] == [REQUEST.url]

    garbled = ScriptedRail(RailRedemption(verification=refused, malformed=True))
    outcome = await GateCore(FakeBackend(), rails=[garbled]).check(
        "res_report", {"payment-signature": "!"}, request=REQUEST
    )
    assert isinstance(outcome, Refusal) and outcome.reason == "receipt_malformed"
    assert garbled.challenged == [REQUEST]  # no headers given: a fresh challenge


async def test_a_paid_redemption_names_its_protocol() -> None:
    backend = FakeBackend()
    verified = await backend.verify("rcpt_good_rail", "res_report")
    rail = ScriptedRail(
        RailRedemption(
            verification=verified, response_headers=[("Payment-Receipt", "r")], source="mpp"
        )
    )
    outcome = await GateCore(backend, rails=[rail]).check(
        "res_report", {"payment-signature": "sig"}, request=REQUEST
    )
    assert isinstance(outcome, Paid) and outcome.payment.source == "mpp"
    assert outcome.headers == (("X-Svc-Receipt", "rcpt_good_rail"), ("Payment-Receipt", "r"))


async def test_a_known_receipt_is_decided_without_building_the_request() -> None:
    built: list[int] = []

    def request() -> RailRequest:
        built.append(1)
        return REQUEST

    core = GateCore(FakeBackend(), rails=[ScriptedRail()])
    first = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_good_1", request)
    assert isinstance(first, Paid) and built == [1]  # the rails were asked once
    for _ in range(3):
        again = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_good_1", request)
        assert again is first
    assert built == [1]  # a repeat is one dictionary lookup: nothing built
    refused = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_bad_1", request)
    assert isinstance(refused, Refusal) and refused.headers


async def _inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
    payment = payment_of(scope)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": (payment.source if payment else "").encode()})


async def test_the_gate_hands_rails_the_apps_public_url() -> None:
    rail = ScriptedRail()
    gate = PaymentGate(
        _inner,
        prices={"GET /v1/report": "res_report"},
        backend=FakeBackend(),
        rails=[rail],
        public_url="https://public.example",
    )
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://internal:8000") as http:
        r = await http.get("/v1/report?a=1")
    assert r.status_code == 402
    assert r.headers["payment-required"] == "challenge-for:GET https://public.example/v1/report?a=1"


def test_a_gate_on_the_service_speaks_the_open_rails_by_default() -> None:
    client = svc.AsyncClient(base_url="http://svc.invalid", seller_key="svc_sk_test_x")
    gate = PaymentGate(_inner, prices={"/x": "res_x"}, client=client)
    assert [type(rail) for rail in gate.core.rails] == [ServiceRails]
    assert PaymentGate(_inner, prices={"/x": "res_x"}, client=client, rails=()).core.rails == ()
    assert PaymentGate(_inner, prices={"/x": "res_x"}, backend=FakeBackend()).core.rails == ()


def test_loading_the_open_rails_keeps_the_recursion_limit() -> None:
    """pympp imports eth-account, whose py_ecc raises the recursion limit process-wide;
    the server loads it through a guard, so deeply nested JSON still fails safely."""
    code = (
        "import sys; before = sys.getrecursionlimit()\n"
        "import reference_server.app\n"
        "from reference_server.domain import open_rails\n"
        "assert 'mpp' not in sys.modules, 'loaded before it is needed'\n"
        "assert open_rails._engine() and 'mpp' in sys.modules\n"
        "assert sys.getrecursionlimit() == before, sys.getrecursionlimit()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

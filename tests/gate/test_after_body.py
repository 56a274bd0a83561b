"""Metered and ``after_body`` routes in ``svc_asgi``: the claim is settled once the whole
answer is out, for the units the app reported (the ``svc.usage`` callable and the
stripped ``X-Svc-Usage`` header); a stream ends with a ``svc-receipt`` event or receipt
trailers; a payer leaving settles what was reported; a failure releases or settles as the
route says.  A recording :class:`HoldingRail` stands in for the service; the streams run
on a real uvicorn."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Mapping
from decimal import Decimal
from typing import Any

import anyio
import attrs
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as StarletteRoute

import svc
from svc.money import metered_amount
from svc_asgi import (
    USAGE_EXTENSION,
    Offer,
    PaymentGate,
    PriceTable,
    RailRedemption,
    RailRequest,
    Route,
)
from svc_asgi._usage import Usage

from ..support import serve_asgi, until
from .test_held import HoldingFake
from .test_units import FakeBackend

pytestmark = pytest.mark.anyio

UNIT_PRICE = Decimal("0.0001")
MAX_AMOUNT = Decimal("0.50")


class MeteredBackend(FakeBackend):
    """``res_tokens…`` are metered (``token`` at 0.0001, at most 0.50); others are fixed.
    A metered receipt is captured here for the units reported (:attr:`captured`)."""

    def __init__(self) -> None:
        super().__init__()
        self.captured: list[tuple[str, int]] = []

    async def capture(self, receipt_id: str, units: int) -> svc.ReceiptVerification:
        self.captured.append((receipt_id, units))
        return svc.ReceiptVerification(
            valid=units > 0,
            receipt_id=receipt_id,
            resource_id="res_tokens",
            amount=metered_amount(units, UNIT_PRICE, MAX_AMOUNT),
            rail="rill",
            reason=None if units else "released",
        )

    async def verify(self, receipt_id: str, resource_id: str | None) -> svc.ReceiptVerification:
        found = await super().verify(receipt_id, resource_id)
        return attrs.evolve(found, resource_id=resource_id) if found.valid else found

    async def describe(self, resource_id: str) -> svc.Resource:
        fixed = await super().describe(resource_id)
        if not resource_id.startswith("res_tokens"):
            return fixed
        return svc.Resource(
            id=resource_id,
            short_id=fixed.short_id,
            kind="http",
            amount=MAX_AMOUNT,
            gate_url=fixed.gate_url,
            pay_url=fixed.pay_url,
            path_or_tool="/v1/tokens",
            pricing="metered",
            unit_price=UNIT_PRICE,
            unit="token",
            max_amount=MAX_AMOUNT,
            fallback_amount=Decimal("0.10"),
        )


class MeteringFake(HoldingFake):
    """:class:`HoldingFake` settling for the units it is given (their metered amount)."""

    def __init__(self, *, refuse: bool = False) -> None:
        super().__init__(refuse=refuse)
        self.units: list[int | None] = []
        self.resource_id = ""

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        claimed = await super().redeem(headers, offer, request)
        self.resource_id = offer.resource_id
        if claimed is None or offer.resource_id == "res_report":
            return claimed
        verification = attrs.evolve(claimed.verification, resource_id=offer.resource_id)
        return attrs.evolve(claimed, verification=verification)

    async def settle(self, claim: str, *, units: int | None = None) -> RailRedemption:
        self.units.append(units)
        if units == 0:  # as the service does: nothing used, nothing charged
            released = svc.ReceiptVerification(valid=False, receipt_id="", reason="released")
            return RailRedemption(verification=released, source="x402")
        settled = await super().settle(claim)
        if not settled.verification.valid or units is None:
            return settled
        amount = metered_amount(units, UNIT_PRICE, MAX_AMOUNT)
        verification = svc.ReceiptVerification(
            valid=True, receipt_id="rcpt_metered", resource_id=self.resource_id, amount=amount
        )
        return RailRedemption(
            verification=verification, source="x402", response_headers=settled.response_headers
        )


PRICES: Mapping[str, str | Route] = {
    "/v1/tokens": "res_tokens",
    "/v1/careful": Route("res_tokens_careful", on_failure="release"),
    "GET /v1/report": Route("res_report", settle="after_body"),
}


def _gate(
    app: Any,
    rail: MeteringFake,
    prices: Mapping[str, str | Route] = PRICES,
    backend: MeteredBackend | None = None,
) -> PaymentGate:
    return PaymentGate(app, prices=prices, backend=backend or MeteredBackend(), rails=[rail])


def _scope(path: str, *, trailers: bool = False, te: bool = False) -> dict[str, Any]:
    headers = [(b"host", b"shop"), (b"payment-signature", b"signed")]
    if te:
        headers.append((b"te", b"trailers"))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "server": ("shop", 80),
        "client": ("127.0.0.1", 1),
        "extensions": {"http.response.trailers": {}} if trailers else {},
    }


async def _call(gate: PaymentGate, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one request through the gate, in process: every message it sent."""
    sent: list[dict[str, Any]] = []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if asked:
            await anyio.sleep_forever()
        asked = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    with contextlib.suppress(RuntimeError):  # an app that raises: the server would log it
        await gate(scope, receive, send)
    return sent


def _streaming_app(
    chunks: list[bytes],
    *,
    usage: int = 0,
    header: bytes | None = None,
    raises: bool = False,
    media_type: bytes = b"text/plain",
) -> Any:
    """Reports ``usage`` per chunk through the extension, ``header`` as X-Svc-Usage."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", media_type)]
        if header is not None:
            headers.append((b"x-svc-usage", header))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, chunk in enumerate(chunks):
            if usage:
                scope["extensions"][USAGE_EXTENSION](usage)
            last = i == len(chunks) - 1 and not raises
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        if raises:
            raise RuntimeError("the model crashed mid-answer")

    return app


def _headers(message: Mapping[str, Any]) -> dict[bytes, bytes]:
    return dict(message.get("headers", ()))


# --- the pieces -----------------------------------------------------------------------------


def test_a_metered_offer_shows_its_unit_price_and_charges_at_most_its_max() -> None:
    resource = anyio.run(MeteredBackend().describe, "res_tokens")
    details = Offer.from_resource(resource).details()
    assert details["amount"] == "0.50" and details["max_amount"] == "0.50"
    assert details["pricing"] == "metered" and details["unit"] == "token"
    assert details["unit_price"] == "0.0001" and details["fallback_amount"] == "0.10"
    fixed = Offer.from_resource(anyio.run(MeteredBackend().describe, "res_report")).details()
    assert "pricing" not in fixed and "unit_price" not in fixed


def test_route_options_are_checked_and_belong_to_the_resource() -> None:
    with pytest.raises(ValueError, match="settle"):
        Route("res_x", settle="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_failure"):
        Route("res_x", on_failure="refund")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="other options"):
        PriceTable({"/a": Route("res_x"), "/b": Route("res_x", settle="after_body")})
    table = PriceTable(PRICES)
    assert table.match_route("GET", "/v1/report") == "res_report"
    assert table.route("res_report").settle == "after_body"
    assert table.route("res_other") == Route("res_other")


def test_usage_adds_whole_units_and_ignores_a_bad_header() -> None:
    usage = Usage()
    usage.add(3)
    for bad in (-1, 1.5, True, "2", svc.money.MAX_UNITS):
        with pytest.raises(ValueError):
            usage.add(bad)  # type: ignore[arg-type]
    kept = usage.take_header([(b"x-svc-usage", b"4"), (b"x-svc-usage", b"-2"), (b"a", b"b")])
    assert kept == [(b"a", b"b")] and usage.units == 7


# --- in process -----------------------------------------------------------------------------


async def test_a_one_message_metered_answer_carries_its_receipt_headers() -> None:
    rail = MeteringFake()
    sent = await _call(
        _gate(_streaming_app([b"done"], usage=3, header=b"4"), rail), _scope("/v1/tokens")
    )
    start, body = sent
    headers = _headers(start)
    assert headers[b"x-svc-receipt"] == b"rcpt_metered" and b"x-svc-usage" not in headers
    assert headers[b"cache-control"] == b"private" and body["body"] == b"done"
    assert rail.units == [7] and rail.calls == [("claim",), ("settle", "clm_1")]


async def test_a_fixed_after_body_route_settles_once_its_last_chunk_is_out() -> None:
    rail = MeteringFake()
    sent: list[dict[str, Any]] = []
    app = _streaming_app([b"one,", b"two"])
    gate = _gate(app, rail)

    async def send(message: Any) -> None:
        sent.append(dict(message))
        if message.get("body") == b"two":
            assert rail.units == []  # not settled before the last chunk went out

    await gate(_scope("/v1/report"), _receive_nothing, send)
    assert [m.get("body") for m in sent] == [None, b"one,", b"two"]
    assert b"x-svc-receipt" not in _headers(sent[0])  # out before the payment settled
    assert _headers(sent[0])[b"cache-control"] == b"private"
    assert rail.units == [None] and rail.calls[-1] == ("settle", "clm_1")


async def _receive_nothing() -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError  # pragma: no cover


async def test_receipt_trailers_only_when_asked_for_and_offered() -> None:
    rail = MeteringFake()
    sent = await _call(
        _gate(_streaming_app([b"a", b"b"], usage=5), rail),
        _scope("/v1/tokens", trailers=True, te=True),
    )
    assert sent[0]["trailers"] is True
    assert b"X-Svc-Receipt" in _headers(sent[0])[b"trailer"]
    assert sent[-1]["type"] == "http.response.trailers"
    trailers = _headers(sent[-1])
    assert trailers[b"x-svc-receipt"] == b"rcpt_metered"
    assert trailers[b"payment-response"] == b"settled" and rail.units == [10]
    for scope in (_scope("/v1/tokens", trailers=True), _scope("/v1/tokens", te=True)):
        sent = await _call(_gate(_streaming_app([b"a", b"b"], usage=5), MeteringFake()), scope)
        assert "trailers" not in sent[0] and b"trailer" not in _headers(sent[0])
        assert sent[-1]["type"] == "http.response.body" and sent[-1]["body"] == b"b"


async def test_a_failed_settlement_after_the_body_is_said_in_the_trailers() -> None:
    rail = MeteringFake(refuse=True)
    sent = await _call(
        _gate(_streaming_app([b"a", b"b"], usage=1), rail),
        _scope("/v1/tokens", trailers=True, te=True),
    )
    assert [m.get("body") for m in sent[1:3]] == [b"a", b"b"]  # nothing to withhold
    assert _headers(sent[-1])[b"x-svc-receipt-error"] == b"payer is short"


async def test_an_app_failing_mid_stream_settles_its_usage_or_releases_as_told() -> None:
    rail = MeteringFake()
    app = _streaming_app([b"a", b"b"], usage=2, raises=True)
    await _call(_gate(app, rail), _scope("/v1/tokens"))
    assert rail.units == [4] and ("release", "clm_1", "answer_failed", "500") not in rail.calls
    careful = MeteringFake()
    await _call(_gate(app, careful), _scope("/v1/careful"))
    assert careful.units == [] and careful.calls[-1] == ("release", "clm_1", "answer_failed", "500")


async def test_a_failure_before_or_at_the_start_releases() -> None:
    async def crashes(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("before the start")

    rail = MeteringFake()
    await _call(_gate(crashes, rail), _scope("/v1/tokens"))
    assert rail.calls[-1] == ("release", "clm_1", "answer_failed", "500") and rail.units == []

    async def not_found(scope: Any, receive: Any, send: Any) -> None:
        scope["extensions"][USAGE_EXTENSION](9)
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b"no such thing"})

    rail = MeteringFake()
    sent = await _call(_gate(not_found, rail), _scope("/v1/tokens"))
    assert sent[0]["status"] == 404 and sent[1]["body"] == b"no such thing"
    assert rail.calls[-1] == ("release", "clm_1", "answer_failed", "404") and rail.units == []


# --- on uvicorn -----------------------------------------------------------------------------


class EventSource:
    """A Starlette app streaming SSE ``tick`` events, one unit each; ``first_read`` is set
    by the test once it has read the first event, and the stream waits for it."""

    def __init__(self, *, endless: bool = False) -> None:
        self.first_read = threading.Event()
        self.reported = 0
        self.ended = threading.Event()
        self.endless = endless

    def app(self) -> Starlette:
        async def ticks(request: Request) -> Response:
            report = request.scope["extensions"][USAGE_EXTENSION]

            async def events() -> AsyncIterator[bytes]:
                try:
                    n = 0
                    while self.endless or n < 3:
                        report(1)
                        self.reported += 1
                        yield f"event: tick\ndata: {n}\n\n".encode()
                        if n == 0:
                            await anyio.to_thread.run_sync(self.first_read.wait, 10)
                        n += 1
                        await anyio.sleep(0.01)
                finally:
                    self.ended.set()

            return StreamingResponse(events(), media_type="text/event-stream")

        return Starlette(routes=[StarletteRoute("/v1/tokens", ticks)])


def _events(text: str) -> list[tuple[str, str]]:
    found = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((fields["event"], fields["data"]))
    return found


async def test_an_event_stream_passes_chunk_by_chunk_and_ends_with_its_receipt() -> None:
    rail = MeteringFake()
    source = EventSource()
    live = serve_asgi(_gate(source.app(), rail))
    try:
        async with (
            httpx.AsyncClient(base_url=live.url) as http,
            http.stream("GET", "/v1/tokens", headers={"PAYMENT-SIGNATURE": "signed"}) as answer,
        ):
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert answer.headers["cache-control"] == "private"
            received = ""
            async for text in answer.aiter_text():
                received += text
                if not source.first_read.is_set() and "\n\n" in received:
                    assert source.reported == 1  # the first event came before the second
                    source.first_read.set()
    finally:
        live.stop()
    events = _events(received)
    assert [name for name, _ in events] == ["tick", "tick", "tick", "svc-receipt"]
    receipt = json.loads(events[-1][1])
    assert receipt == {"receipt_id": "rcpt_metered", "amount": "0.0003", "units": 3, "rail": "x402"}
    assert rail.units == [3]


async def test_a_payer_leaving_mid_stream_is_charged_what_was_reported() -> None:
    rail = MeteringFake()
    source = EventSource(endless=True)
    live = serve_asgi(_gate(source.app(), rail))
    try:
        async with httpx.AsyncClient(base_url=live.url) as http:
            async with http.stream(
                "GET", "/v1/tokens", headers={"PAYMENT-SIGNATURE": "signed"}
            ) as answer:
                received = ""
                async for text in answer.aiter_text():
                    received += text
                    source.first_read.set()
                    if received.count("\n\n") >= 3:
                        break  # leave after three events
            until(lambda: rail.units, "the stream was never settled")
    finally:
        live.stop()
    assert source.ended.is_set()
    assert 3 <= rail.units[0] <= source.reported  # never more than reported
    assert ("release", "clm_1", "answer_failed", "500") not in rail.calls


async def test_metered_and_after_body_decisions_are_never_remembered() -> None:
    prices = {**PRICES, "GET /v1/plain": "res_plain"}
    backend = MeteredBackend()
    gate = _gate(_streaming_app([b"ok"], header=b"2"), MeteringFake(), prices, backend)
    for path, resource_id in (("/v1/tokens", "res_tokens"), ("/v1/report", "res_report")):
        scope = {**_scope(path), "headers": [(b"host", b"shop"), (b"x-svc-receipt", b"rcpt_good")]}
        sent = await _call(gate, scope)
        assert sent[0]["status"] == 200 and b"x-svc-usage" not in _headers(sent[0])
        assert gate.core.remembered(resource_id, b"x-svc-receipt", b"rcpt_good") is None
    # The metered ledger receipt was captured for the two units its answer reported.
    assert backend.captured == [("rcpt_good", 2)]
    scope = {
        **_scope("/v1/plain"),
        "headers": [(b"host", b"shop"), (b"x-svc-receipt", b"rcpt_good")],
    }
    await _call(gate, scope)
    assert gate.core.remembered("res_plain", b"x-svc-receipt", b"rcpt_good") is not None


async def test_an_event_stream_that_used_nothing_ends_with_an_unpaid_receipt_event() -> None:
    rail = MeteringFake()
    app = _streaming_app([b"data: a\n\n", b"data: b\n\n"], media_type=b"text/event-stream")
    sent = await _call(_gate(app, rail), _scope("/v1/tokens"))
    assert sent[-1]["more_body"] is False and rail.units == [0]
    name, data = _events(sent[-1]["body"].decode())[0]
    assert name == "svc-receipt"
    assert json.loads(data) == {
        "receipt_id": None,
        "amount": "0",
        "units": 0,
        "rail": "x402",
        "reason": "released",
    }


async def test_a_send_failing_because_the_payer_left_settles_even_a_careful_route() -> None:
    rail = MeteringFake()
    app = _streaming_app([b"a", b"b", b"c"], usage=1)
    delivered: list[bytes] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body" and delivered:
            raise OSError("the payer left")
        if message["type"] == "http.response.body":
            delivered.append(message["body"])

    with pytest.raises(OSError):
        await _gate(app, rail)(_scope("/v1/careful"), _receive_nothing, send)
    assert delivered == [b"a"] and rail.units == [2]  # the second was reported, not sent
    assert not any(call[0] == "release" for call in rail.calls)

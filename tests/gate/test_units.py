"""The gate's parts in process: price matching, the flight cache, the open-rails seam,
pass-through, and configuration errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

import svc
from svc.receipts import MalformedReceipt
from svc_asgi import (
    BackendUnavailable,
    GateBackend,
    GateCore,
    Offer,
    Paid,
    PaymentGate,
    PaymentRail,
    PriceTable,
    RailRedemption,
    RailRequest,
    Refusal,
    payment_of,
)
from svc_asgi._asgi import MAX_HEADER_BYTES, credential_headers, header_map
from svc_asgi._cache import FlightCache, LruCache

# --- prices ---------------------------------------------------------------------------------


def test_price_matching_rules() -> None:
    table = PriceTable(
        {
            "GET /v1/report": "res_report",
            "POST /v1/items/special": "res_special",
            "/v1/items/{item_id:int}": "res_item",
            "/v1/files/{rest:path}": "res_files",
            "mcp:search": "res_search",
        }
    )
    assert table.match_route("GET", "/v1/report") == "res_report"
    assert table.match_route("HEAD", "/v1/report") == "res_report"  # HEAD is served as GET
    assert table.match_route("GET", "/v1/report/") == "res_report"
    assert table.match_route("POST", "/v1/report") is None
    assert table.match_route("GET", "/v1/reports") is None
    assert table.match_route("GET", "/V1/report") is None  # routing is case-sensitive
    assert table.match_route("DELETE", "/v1/items/abc") == "res_item"  # any one segment
    assert table.match_route("POST", "/v1/items/special") == "res_special"  # exact first
    assert table.match_route("GET", "/v1/items/special") == "res_item"
    assert table.match_route("GET", "/v1/items/1/2") is None
    assert table.match_route("GET", "/v1/files/") == "res_files"
    assert table.match_route("PUT", "/v1/files/a/b/c.txt") == "res_files"
    assert table.match_tool("search") == "res_search" and table.match_tool("ping") is None
    assert table.resource_ids == {
        "res_report",
        "res_special",
        "res_item",
        "res_files",
        "res_search",
    }


def test_exact_prices_answer_the_same_for_every_method_and_spelling() -> None:
    # Exact prices are looked up in one table built up front; it must answer exactly as
    # the matching rules do, for methods and spellings it holds and those it does not.
    table = PriceTable({"/": "res_root", "GET /a": "res_get_a", "/a": "res_any_a", "PUT /b": "b"})
    assert table.match_route("GET", "/") == "res_root"
    assert table.match_route("PROPFIND", "/") == "res_root"  # any method, even unusual ones
    assert table.match_route("GET", "//") == "res_root"
    assert table.match_route("GET", "/a/") == "res_get_a"
    assert table.match_route("HEAD", "/a") == "res_get_a"
    assert table.match_route("POST", "/a/") == "res_any_a"
    assert table.match_route("PUT", "/b/") == "b"
    assert table.match_route("GET", "/b") is None
    assert table.match_route("get", "/a") == "res_any_a"  # methods are matched as given


@pytest.mark.parametrize(
    "prices",
    [{}, {"v1/report": "res_x"}, {"FETCH /x": "res_x"}, {"/x": ""}, {"mcp:": "res_x"}],
)
def test_bad_price_tables_are_refused(prices: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        PriceTable(prices)


# --- the flight cache -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_flight_cache_ttl_and_bounds() -> None:
    now = [0.0]
    cache: FlightCache[str, int] = FlightCache(ttl=10, max_entries=2, clock=lambda: now[0])
    loads: list[str] = []

    async def load(key: str) -> int:
        loads.append(key)
        return len(loads)

    assert await cache.get("a", lambda: load("a")) == 1
    assert await cache.get("a", lambda: load("a")) == 1
    now[0] = 10.5
    assert await cache.get("a", lambda: load("a")) == 2  # expired
    await cache.get("b", lambda: load("b"))
    await cache.get("c", lambda: load("c"))  # evicts the oldest ("a")
    assert cache.peek("a") is None and cache.peek("c") is not None


def test_lru_cache_evicts_only_the_least_recently_used_and_drops_expired_entries() -> None:
    now = [0.0]
    cache: LruCache[str, int] = LruCache(3, clock=lambda: now[0])
    for i, key in enumerate("abc"):
        cache.put(key, i)
    assert cache.get("a") == 0  # "a" is now the most recently used; "b" the least
    cache.put("d", 3)
    assert len(cache) == 3 and cache.get("b") is None
    assert (cache.get("a"), cache.get("c"), cache.get("d")) == (0, 2, 3)
    cache.put("e", 4, expires=5.0)  # past the bound again: "a" is now the coldest
    assert cache.get("a") is None and cache.get("e") == 4
    now[0] = 5.0
    assert cache.expiry("e") == 5.0 and cache.get("e") is None  # expired: absent, dropped
    assert len(cache) == 2 and cache.expiry("e") is None


@pytest.mark.anyio
async def test_flight_cache_shares_failures_and_survives_a_cancelled_leader() -> None:
    cache: FlightCache[str, str] = FlightCache(ttl=60)
    release = anyio.Event()
    calls = 0

    async def failing() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        raise BackendUnavailable("down")

    errors: list[BaseException] = []

    async def ask() -> None:
        try:
            await cache.get("k", failing)
        except BackendUnavailable as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(ask)
        await anyio.sleep(0.05)
        release.set()
    assert calls == 1 and len(errors) == 5  # one call, everyone told
    assert cache.peek("k") is None  # failures are not cached

    started = anyio.Event()

    async def slow() -> str:
        started.set()
        await anyio.sleep(10)
        return "never"

    results: list[str] = []
    leader_scope = anyio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            await cache.get("j", slow)

    async def follower() -> None:
        results.append(await cache.get("j", _value("from follower")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(leader)
        await started.wait()
        tg.start_soon(follower)
        await anyio.sleep(0.05)
        leader_scope.cancel()
    assert results == ["from follower"]


def _value(value: str) -> Any:
    async def load() -> str:
        return value

    return load


# --- a fake backend and rail, in process ----------------------------------------------------


class FakeBackend:
    def __init__(self, *, down: bool = False, jwks: svc.Jwks | None = None) -> None:
        self.down = down
        self.verified: list[tuple[str, str | None]] = []
        self.keys = jwks or svc.Jwks(keys=[])
        self.jwks_fetches = 0

    async def jwks(self) -> svc.Jwks:
        self.jwks_fetches += 1
        if self.down:
            raise BackendUnavailable("down")
        return self.keys

    async def verify(self, receipt_id: str, resource_id: str | None) -> svc.ReceiptVerification:
        if self.down:
            raise BackendUnavailable("down")
        self.verified.append((receipt_id, resource_id))
        good = receipt_id.startswith("rcpt_good")
        return svc.ReceiptVerification(
            valid=good,
            receipt_id=receipt_id,
            resource_id="res_report" if good else None,
            amount=Decimal("0.05") if good else None,
            rail="x402-test" if "rail" in receipt_id else "rill",
            reason=None if good else "unknown receipt",
        )

    async def capture(self, receipt_id: str, units: int) -> svc.ReceiptVerification:
        """These fakes sell at fixed prices: there is nothing to capture."""
        return svc.ReceiptVerification(
            valid=False, receipt_id=receipt_id, reason="not a metered receipt"
        )

    async def describe(self, resource_id: str) -> svc.Resource:
        if self.down:
            raise BackendUnavailable("down")
        return svc.Resource(
            id=resource_id,
            short_id="Ab3dE5gH7j",
            kind="http",
            amount=Decimal("0.05"),
            gate_url="https://svc.example/g/Ab3dE5gH7j",
            pay_url="https://svc.example/buy/Ab3dE5gH7j",
            path_or_tool="/v1/report",
        )


class FakeRail:
    """Stands in for x402: a challenge header on 402s, a credential header to redeem."""

    name = "fake402"

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    async def challenge(self, offer: Offer, request: RailRequest) -> Sequence[tuple[str, str]]:
        return [("PAYMENT-REQUIRED", f"fake:{offer.resource_id}:{offer.amount}:{request.url}")]

    async def redeem(
        self, headers: Mapping[str, str], offer: Offer, request: RailRequest
    ) -> RailRedemption | None:
        credential = headers.get("payment-signature")
        if credential is None:
            return None
        if credential == "garbage":
            raise MalformedReceipt("PAYMENT-SIGNATURE is not a signed payload")
        verification = await self.backend.verify("rcpt_good_rail", offer.resource_id)
        return RailRedemption(
            verification=verification, response_headers=[("PAYMENT-RESPONSE", "settled")]
        )


async def _inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
    payment = payment_of(scope)
    body = f"{payment.source}:{payment.receipt_id}" if payment else "free"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body.encode()})


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://shop")


def test_fakes_satisfy_the_protocols() -> None:
    backend = FakeBackend()
    assert isinstance(backend, GateBackend) and isinstance(FakeRail(backend), PaymentRail)


@pytest.mark.anyio
async def test_the_open_rails_seam() -> None:
    backend = FakeBackend()
    gate = PaymentGate(
        _inner,
        prices={"GET /v1/report": "res_report"},
        backend=backend,
        rails=[FakeRail(backend)],
    )
    async with _client(gate) as http:
        unpaid = await http.get("/v1/report")
        assert unpaid.status_code == 402
        assert unpaid.headers["payment-required"] == "fake:res_report:0.05:http://shop/v1/report"
        paid = await http.get("/v1/report", headers={"PAYMENT-SIGNATURE": "signed"})
        assert paid.status_code == 200 and paid.text == "fake402:rcpt_good_rail"
        assert paid.headers["payment-response"] == "settled"
        assert paid.headers["x-svc-receipt"] == "rcpt_good_rail"
        bad = await http.get("/v1/report", headers={"PAYMENT-SIGNATURE": "garbage"})
        assert bad.status_code == 402
        assert bad.json()["error"]["message"].startswith("Malformed fake402 credential")
        # Without a rail credential, service receipts work as before.
        receipt = await http.get("/v1/report", headers={"X-Svc-Receipt": "rcpt_good_one"})
        assert receipt.text == "header:rcpt_good_one"


@pytest.mark.anyio
async def test_core_outcomes_directly() -> None:
    core = GateCore(FakeBackend(), cache_ttl=0)
    outcome = await core.check("res_report", {"x-svc-receipt": "rcpt_good_1"})
    assert isinstance(outcome, Paid) and outcome.payment.amount == Decimal("0.05")
    refused = await core.check("res_other", {"X-Svc-Receipt": "rcpt_good_1"})
    assert isinstance(refused, Refusal) and refused.extra["refused_because"] == (
        "receipt is for another resource"
    )
    widened = await core.check(
        "res_other", {"x-svc-receipt": "rcpt_good_1"}, accepted={"res_report"}
    )
    assert isinstance(widened, Paid)
    meta = await core.check("res_report", {}, meta_receipt="rcpt_good_2")
    assert isinstance(meta, Paid) and meta.payment.source == "mcp_meta"
    status, headers, body = refused.render("req_1")
    assert status == 402 and (b"cache-control", b"no-store") in headers and b"req_1" in body
    down = await GateCore(FakeBackend(down=True)).check("res_report", {})
    assert isinstance(down, Refusal) and down.status == 503
    with pytest.raises(ValueError):
        GateCore(FakeBackend(), on_service_error="maybe")  # type: ignore[arg-type]


class _Failing(FakeBackend):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def describe(self, resource_id: str) -> svc.Resource:
        raise self.error


@pytest.mark.anyio
@pytest.mark.parametrize("on_service_error", ["fail_closed", "fail_open"])
async def test_a_backend_failure_nobody_foresaw_fails_closed_and_is_logged_as_such(
    caplog: pytest.LogCaptureFixture, on_service_error: Any
) -> None:
    """Not an outage (which ``on_service_error`` may open) and not a wrong key: a bug.
    The request is refused whatever the policy, and the log says so with the traceback,
    instead of sending the operator to check a configuration that is right."""
    bug = GateCore(
        _Failing(RuntimeError("Event loop is closed")), on_service_error=on_service_error
    )
    with caplog.at_level("ERROR", logger="svc_asgi"):
        outcome = await bug.check("res_report", {})
    assert isinstance(outcome, Refusal) and outcome.status == 503
    (record,) = caplog.records
    assert "failed unexpectedly" in record.getMessage() and record.exc_info is not None
    caplog.clear()
    wrong = svc.NotFoundError("No such resource.", status=404, code="not_found")
    with caplog.at_level("ERROR", logger="svc_asgi"):
        outcome = await GateCore(_Failing(wrong), on_service_error=on_service_error).check(
            "res_report", {}
        )
    assert isinstance(outcome, Refusal) and outcome.status == 503
    (record,) = caplog.records
    assert "misconfigured" in record.getMessage() and record.exc_info is None


@pytest.mark.anyio
async def test_pass_through_is_untouched() -> None:
    seen: list[tuple[Any, Any, Any]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope, receive, send))

    backend = FakeBackend()
    gate = PaymentGate(
        inner, prices={"/ws": "res_report", "GET /v1/report": "res_report"}, backend=backend
    )

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        pass

    for scope in (
        {"type": "websocket", "path": "/chat", "headers": []},  # an unpriced handshake
        {"type": "lifespan"},
        {"type": "http", "method": "GET", "path": "/free", "headers": []},
    ):
        await gate(scope, receive, send)
        assert seen[-1] == (scope, receive, send)
        assert seen[-1][1] is receive and seen[-1][2] is send
    assert backend.verified == []


def test_payment_of_and_configuration() -> None:
    assert payment_of({"type": "http"}) is None
    assert payment_of({"type": "http", "state": {"svc_payment": "not a payment"}}) is None

    class Req:
        scope: dict[str, Any] = {"type": "http", "state": {}}

    assert payment_of(Req()) is None
    with pytest.raises(TypeError):
        payment_of(42)
    with pytest.raises(ValueError):
        PaymentGate(_inner, prices={"/x": "res_x"}, backend=FakeBackend(), max_body_bytes=0)
    with pytest.raises(ValueError):
        PaymentGate(_inner, prices={"/x": "res_x"}, backend=FakeBackend(), cache_ttl=-1)


def test_header_reading_is_bounded_and_follows_the_receipt_preference() -> None:
    padding = [(b"x-pad-%d" % i, b"p" * 1000) for i in range(MAX_HEADER_BYTES // 1000 + 1)]
    scope = {"headers": [*padding, (b"x-svc-receipt", b"rcpt_late")]}
    assert "x-svc-receipt" not in header_map(scope)  # never read: the request is unpaid
    assert credential_headers(scope) == (None, False)
    assert header_map({"headers": [(b"a", b"1"), (b"a", b"2")]}) == {"a": "1"}
    # The header svc.receipts would read: X-Svc-Receipt, then Payment-Receipt, then
    # PAYMENT-RESPONSE; the first of duplicates.
    both = [(b"payment-response", b"rcpt_x402"), (b"x-svc-receipt", b"rcpt_svc1")]
    assert credential_headers({"headers": both})[0] == (b"x-svc-receipt", b"rcpt_svc1")
    dups = [(b"payment-receipt", b"rcpt_first"), (b"payment-receipt", b"rcpt_second")]
    assert credential_headers({"headers": dups})[0] == (b"payment-receipt", b"rcpt_first")


@pytest.mark.anyio
async def test_decided_requests_last_as_long_as_their_cached_answers() -> None:
    backend = FakeBackend()
    core = GateCore(backend, cache_ttl=60)
    first = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_good_1")
    again = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_good_1")
    assert isinstance(first, Paid) and again is first and len(backend.verified) == 1
    core.forget()
    await core.check_header("res_report", b"x-svc-receipt", b"rcpt_good_1")
    assert len(backend.verified) == 2
    refused = await core.check_header("res_report", b"x-svc-receipt", b"rcpt_bad_1")
    assert isinstance(refused, Refusal)
    malformed = await core.check_header("res_report", b"payment-response", b"%%%")
    assert isinstance(malformed, Refusal) and malformed.reason == "receipt_malformed"
    uncached = GateCore(backend, cache_ttl=0)
    for _ in range(2):
        await uncached.check_header("res_report", b"x-svc-receipt", b"rcpt_good_2")
    assert backend.verified.count(("rcpt_good_2", "res_report")) == 2


@pytest.mark.anyio
async def test_full_gate_caches_drop_one_cold_entry_and_recheck_expired_ones() -> None:
    """At the bound, the least recently used decision goes, not every decision at once
    (a cold-cache cliff that would send every request to the service together)."""
    now = [0.0]
    backend = FakeBackend()
    core = GateCore(backend, cache_ttl=60, max_cache_entries=2, clock=lambda: now[0])

    async def pay(receipt: bytes) -> None:
        assert isinstance(await core.check_header("res_report", b"x-svc-receipt", receipt), Paid)

    def asked(receipt: bytes) -> int:
        return backend.verified.count((receipt.decode(), "res_report"))

    await pay(b"rcpt_good_a")
    await pay(b"rcpt_good_b")
    await pay(b"rcpt_good_a")  # a hit, so "b" is now the least recently used
    await pay(b"rcpt_good_c")  # past the bound: "b" alone goes
    remembered = [
        core.remembered("res_report", b"x-svc-receipt", b"rcpt_good_" + k) is not None
        for k in (b"a", b"b", b"c")
    ]
    assert remembered == [True, False, True]
    await pay(b"rcpt_good_a")
    await pay(b"rcpt_good_c")
    assert (asked(b"rcpt_good_a"), asked(b"rcpt_good_c")) == (1, 1)  # no cliff
    now[0] = 61.0  # every answer has expired: each is checked with the service again
    await pay(b"rcpt_good_a")
    assert asked(b"rcpt_good_a") == 2


@pytest.mark.anyio
async def test_lifespan_shutdown_closes_the_gates_own_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SVC_SELLER_KEY", "svc_sk_test_x")
    closed: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})

    gate = PaymentGate(app, prices={"/x": "res_x"})
    assert gate._owned_client is not None
    original = gate._owned_client.aclose

    async def aclose() -> None:
        closed.append(True)
        await original()

    monkeypatch.setattr(gate._owned_client, "aclose", aclose)
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: Any) -> None:
        sent.append(message["type"])

    await gate({"type": "lifespan"}, receive, send)
    assert closed == [True]
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


#: An app answering with one start message it reuses: the gate must never change it.
_CONSTANT_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"X-Svc-Receipt", b"app's own")],
}


@pytest.mark.anyio
async def test_a_known_receipt_is_served_alike_by_many_requests_at_once() -> None:
    # The known-receipt path shares one remembered decision between concurrent requests:
    # each still gets its own payment in its scope and its own answer headers, the app's
    # copy of X-Svc-Receipt replaced, Cache-Control: private added once, and the app's
    # reused start message left as it was.
    backend = FakeBackend()
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        payment = payment_of(scope)
        assert payment is not None
        seen.append(payment.receipt_id)
        await anyio.lowlevel.checkpoint()  # let the other requests interleave
        await send(_CONSTANT_START)
        await send({"type": "http.response.body", "body": payment.receipt_id.encode()})

    gate = PaymentGate(app, prices={"GET /v1/report": "res_report"}, backend=backend)
    answers: list[httpx.Response] = []
    async with _client(gate) as http:
        first = await http.get("/v1/report", headers={"X-Svc-Receipt": "rcpt_good_1"})

        async def one(receipt: str) -> None:
            answers.append(await http.get("/v1/report", headers={"X-Svc-Receipt": receipt}))

        async with anyio.create_task_group() as tasks:
            for n in range(40):
                tasks.start_soon(one, "rcpt_good_1" if n % 2 else "rcpt_good_2")
    assert len(backend.verified) == 2  # one per receipt: the rest were remembered
    for answer in [first, *answers]:
        receipt = answer.text
        assert answer.status_code == 200 and receipt in ("rcpt_good_1", "rcpt_good_2")
        assert answer.headers.get_list("x-svc-receipt") == [receipt]
        assert answer.headers.get_list("cache-control") == ["private"]
    assert sorted(seen) == sorted(a.text for a in [first, *answers])
    assert _CONSTANT_START["headers"] == [
        (b"content-type", b"text/plain"),
        (b"X-Svc-Receipt", b"app's own"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("app_headers", "expected"),
    [
        # The app's own Cache-Control, any case, is kept and no second one is added.
        (((b"Cache-Control", b"no-cache"),), {"cache-control": ["no-cache"]}),
        # Headers as a tuple (any iterable), with a copy of X-Svc-Receipt to replace.
        (
            ((b"x-svc-receipt", b"app's own"), (b"content-type", b"text/plain")),
            {"cache-control": ["private"], "content-type": ["text/plain"]},
        ),
        ((), {"cache-control": ["private"]}),
    ],
)
async def test_a_known_receipt_adds_its_headers_to_whatever_the_app_sends(
    app_headers: tuple[tuple[bytes, bytes], ...], expected: dict[str, list[str]]
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": app_headers})
        await send({"type": "http.response.body", "body": b"ok"})

    gate = PaymentGate(app, prices={"GET /v1/report": "res_report"}, backend=FakeBackend())
    async with _client(gate) as http:
        for _ in range(2):  # verified, then remembered
            answer = await http.get("/v1/report", headers={"X-Svc-Receipt": "rcpt_good_1"})
            assert answer.status_code == 200 and answer.text == "ok"
            assert answer.headers.get_list("x-svc-receipt") == ["rcpt_good_1"]
            for name, values in expected.items():
                assert answer.headers.get_list(name) == values


@pytest.mark.anyio
async def test_a_gate_under_a_root_path_prices_the_app_s_own_route() -> None:
    # The hot path looks the route up directly only when there is no root_path to strip.
    gate = PaymentGate(_inner, prices={"GET /v1/report": "res_report"}, backend=FakeBackend())

    async def mounted(scope: Any, receive: Any, send: Any) -> None:
        await gate({**scope, "root_path": "/api"}, receive, send)

    async with _client(mounted) as http:
        assert (await http.get("/api/v1/report")).status_code == 402
        paid = await http.get("/api/v1/report", headers={"X-Svc-Receipt": "rcpt_good_1"})
        assert paid.status_code == 200 and paid.headers["x-svc-receipt"] == "rcpt_good_1"
        assert (await http.get("/api/v1/free")).status_code == 200

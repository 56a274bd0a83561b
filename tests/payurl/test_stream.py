"""pay-url's streaming mode (issue 27, items 4 and 6): the paid answer reaches the caller
chunk by chunk as the URL sends it, through the SDK's ``pay_url(stream=True)``, and the
money concludes after the last chunk -- for an ``upto`` URL only what it settled is spent.

The seller (:func:`.apps.streaming_metered_app`) streams server-sent events and settles
with x402's resource server after its last one (x402's own middleware would buffer them).
"""

from __future__ import annotations

import re
import runpy
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

import svc

from ..sandbox.helpers import serve
from ..support import LiveServer, assert_ledger_sound
from .apps import streaming_metered_app
from .helpers import Agent, attempt_row, chain_balance, make_agent, new_key

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
EVENTS = [f"data: token {i}\n\n".encode() for i in range(20)]
#: 0.001 per event, in atomic units.
UNIT = 1_000


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds the seller's last event until set (set at the end whatever happened)."""
    event = threading.Event()
    yield event
    event.set()


def stream_url(facilitator: str, pay_to: str, gate: threading.Event, **kw: int) -> Iterator[str]:
    with serve(
        streaming_metered_app(facilitator, pay_to, EVENTS, UNIT, before_last=gate, **kw)
    ) as url:
        yield url + "/stream"


def test_chunks_arrive_before_the_seller_ends_and_only_the_settled_amount_is_spent(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server, allowance="1.00", period="day")
    for url in stream_url(facilitator, pay_to, gate):
        with agent.client.spend.pay_url(url, stream=True) as paid:
            assert (paid.head.status, paid.head.headers["content-type"]) == (
                200,
                "text/event-stream; charset=utf-8",
            )
            chunks = []
            for chunk in paid:
                if not chunks:  # the seller is holding its last event until now
                    assert EVENTS[-1] not in chunk and not gate.is_set()
                    gate.set()
                chunks.append(chunk)
    assert b"".join(chunks) == b"".join(EVENTS)
    result = paid.result
    assert isinstance(result, svc.PayUrlResult) and result.status == "succeeded"
    assert (result.amount, result.max_amount, result.body) == (
        Decimal("0.020"),
        Decimal("0.50"),
        "",
    )
    assert result.request_id is not None
    state = agent.spend()
    assert (state.balance, state.spent_this_period) == (Decimal("9.98"), Decimal("0.02"))
    assert chain_balance(server, pay_to) == UNIT * len(EVENTS)
    assert_ledger_sound(server)


@pytest.mark.anyio
async def test_the_async_client_streams_too(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server)
    gate.set()
    for url in stream_url(facilitator, pay_to, gate):
        client = svc.AsyncClient(base_url=server.url, wallet_key=agent.wallet_key)
        async with client, await client.spend.pay_url(url, stream=True) as paid:
            body = b"".join([chunk async for chunk in paid])
    assert body == b"".join(EVENTS)
    assert paid.result is not None and paid.result.amount == Decimal("0.020")
    assert_ledger_sound(server)


def test_a_seller_that_dies_midway_ends_the_stream_with_an_error_and_charges_nothing(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server)
    chunks = []
    for url in stream_url(facilitator, pay_to, gate, die_after=3):
        with (
            agent.client.spend.pay_url(url, stream=True) as paid,
            pytest.raises(svc.APIError) as broke,
        ):
            for chunk in paid:
                chunks.append(chunk)
    assert b"".join(chunks) == b"".join(EVENTS[:3])
    error = broke.value
    assert error.code == "upstream_unavailable" and error.request_id is not None
    assert paid.result is None
    row = attempt_row(server, error.details["attempt_id"])
    assert (row.status, row.error_code) == ("failed", "upstream_unavailable")
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("10.00"), 0)
    assert chain_balance(server, pay_to) == 0
    assert_ledger_sound(server)


def test_a_caller_that_leaves_midway_leaves_no_reservation(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server)
    for url in stream_url(facilitator, pay_to, gate):
        with httpx.stream(
            "POST",
            server.url + "/spend/pay-url",
            json={"url": url, "stream": True},
            headers={"Authorization": f"Bearer {agent.wallet_key}"},
            timeout=60,
        ) as r:
            lines = r.iter_lines()
            assert '"head"' in next(lines) and '"chunk"' in next(lines)
        attempt = _concluded(agent)
        gate.set()  # lets the seller's stream end
    assert attempt.status == "failed"
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("10.00"), 0)
    assert chain_balance(server, pay_to) == 0
    assert_ledger_sound(server)


def _concluded(agent: Agent) -> svc.SpendAttempt:
    """The agent's one attempt once it has left ``paying`` (the service concludes it on
    its own once the caller has gone)."""
    deadline = time.monotonic() + 20
    while True:
        [attempt] = agent.client.spend.attempts().data
        if attempt.status not in ("probing", "paying") or time.monotonic() > deadline:
            return attempt
        time.sleep(0.05)


def test_refusals_before_the_head_answer_as_without_stream(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server, max_per_tx="0.25")
    for url in stream_url(facilitator, pay_to, gate):
        with pytest.raises(svc.PaymentRequiredError) as refused:
            agent.client.spend.pay_url(url, stream=True)
        r = agent.pay_url(url, stream=True, dry_run=True)
    assert refused.value.code == "max_per_tx_exceeded"
    assert (r.status_code, r.json()["error"]["code"]) == (422, "validation_error")
    assert r.json()["error"]["details"]["errors"][0]["field"] == "stream"
    assert_ledger_sound(server)


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pay_url_stream.py"


def test_the_docs_example_runs_as_shown(
    server: LiveServer,
    facilitator: str,
    pay_to: str,
    gate: threading.Event,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/pay-url.md shows docs/examples/pay_url_stream.py verbatim, and it prints what
    its comments say."""
    doc = (EXAMPLE.parents[1] / "pay-url.md").read_text()
    [shown] = re.findall(
        r"<!-- example: docs/examples/pay_url_stream.py -->\n```python\n(.*?)```", doc, re.S
    )
    assert shown == EXAMPLE.read_text()
    agent = make_agent(server)
    gate.set()
    for url in stream_url(facilitator, pay_to, gate):
        for key, value in {
            "SVC_BASE_URL": server.url,
            "SVC_WALLET_KEY": agent.wallet_key,
            "STREAMING_URL": url,
        }.items():
            monkeypatch.setenv(key, value)
        runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines() == [
        "200 text/event-stream; charset=utf-8",
        "20",
        "0.02 of at most 0.50",
    ]
    assert_ledger_sound(server)


def test_a_replay_of_the_key_yields_the_stored_body_and_result_and_pays_once(
    server: LiveServer, facilitator: str, pay_to: str, gate: threading.Event
) -> None:
    agent = make_agent(server)
    gate.set()
    once = svc.RequestOptions(idempotency_key=new_key())
    answers = []
    for url in stream_url(facilitator, pay_to, gate):
        for _ in range(2):
            with agent.client.spend.pay_url(url, stream=True, options=once) as paid:
                answers.append((b"".join(paid), paid.result))
        buffered = agent.client.spend.pay_url(url, options=once)  # the same payment
    [(first, paid_first), (again, replayed)] = answers
    assert paid_first is not None and buffered.attempt_id == paid_first.attempt_id
    assert first == again == b"".join(EVENTS)  # within the 8 KB a replay keeps
    assert paid_first is not None and replayed is not None
    assert replayed.attempt_id == paid_first.attempt_id and replayed.amount == Decimal("0.02")
    assert agent.spend().spent_total == Decimal("0.02")
    assert chain_balance(server, pay_to) == UNIT * len(EVENTS)
    assert_ledger_sound(server)

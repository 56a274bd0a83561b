"""The unlock body (cut at 8 KB, never inside a UTF-8 character, base64 when binary), and
``Idempotency-Key`` replays that answer from the stored attempt and pay nothing."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from decimal import Decimal

import anyio.to_thread
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from ..sandbox.helpers import serve
from ..support import LiveServer, until
from .apps import PRICE, gated_app
from .helpers import Agent, chain_balance, make_agent, new_key

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
LIMIT = 8192


Seller = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def seller(facilitator: str, pay_to: str) -> Seller:
    """A paid ``/paid`` answering ``body`` as ``media_type``."""

    @contextmanager
    def start(body: bytes, media_type: str = "text/plain; charset=utf-8") -> Iterator[str]:
        async def answer(request: Request) -> Response:
            return Response(body, media_type=media_type)

        with serve(gated_app(facilitator, pay_to, answer)) as url:
            yield url + "/paid"

    return start


def _paid(agent: Agent, url: str) -> dict[str, object]:
    r = agent.pay_url(url)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_20_kb_body_comes_back_as_exactly_8_kb(seller: Seller, agent: Agent) -> None:
    with seller(b"a" * 20 * 1024) as url:
        paid = _paid(agent, url)
    assert paid["body_truncated"] is True and paid["body_encoding"] == "utf-8"
    assert isinstance(paid["body"], str) and len(paid["body"].encode()) == LIMIT


def test_the_cut_never_splits_a_utf8_character(seller: Seller, agent: Agent) -> None:
    with seller("€".encode() * 5000) as url:
        paid = _paid(agent, url)
    body = paid["body"]
    assert isinstance(body, str) and paid["body_truncated"] is True
    assert body == "€" * (LIMIT // 3) and len(body.encode()) == LIMIT - LIMIT % 3


def test_a_binary_body_comes_back_as_base64(seller: Seller, agent: Agent) -> None:
    raw = bytes(range(256)) * 4
    with seller(raw, "application/octet-stream") as url:
        paid = agent.client.spend.pay_url(url)
    assert paid.body_encoding == "base64" and paid.content == raw
    assert paid.body == base64.b64encode(raw).decode() and paid.body_truncated is False


def test_a_post_carries_its_json_body(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str
) -> None:
    async def echo(request: Request) -> Response:
        return PlainTextResponse(f"{request.method} {(await request.body()).decode()}")

    with serve(gated_app(facilitator, pay_to, echo)) as url:
        paid = agent.client.spend.pay_url(url + "/paid", method="POST", json={"q": 1.5, "n": [1]})
    assert paid.body == 'POST {"q":1.5,"n":[1]}'


def test_a_replay_returns_the_stored_answer_and_pays_nothing(
    server: LiveServer, agent: Agent, x402_url: str, pay_to: str
) -> None:
    key = new_key()
    first = agent.pay_url(x402_url, key=key)
    assert first.status_code == 200, first.text
    again = agent.pay_url(x402_url, key=key)
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["original-request-id"] == first.json()["request_id"]
    replayed = {k: v for k, v in again.json().items() if k != "request_id"}
    assert replayed == {k: v for k, v in first.json().items() if k != "request_id"}
    assert chain_balance(server, pay_to) == PRICE
    assert agent.spend().spent_total == Decimal("0.25")
    assert len(agent.client.spend.attempts().data) == 1


def test_a_refusal_is_replayed_too(server: LiveServer, x402_url: str) -> None:
    agent = make_agent(server, max_per_tx="0.10")
    key = new_key()
    first, again = agent.pay_url(x402_url, key=key), agent.pay_url(x402_url, key=key)
    assert first.status_code == again.status_code == 402
    assert again.json()["error"] == first.json()["error"]
    assert again.headers["idempotent-replayed"] == "true"


def test_the_same_key_for_another_request_is_refused(agent: Agent, x402_url: str) -> None:
    key = new_key()
    assert agent.pay_url(x402_url, key=key).status_code == 200
    r = agent.pay_url(x402_url + "?other=1", key=key)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "idempotency_key_reused")


def test_a_key_in_flight_is_409(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str
) -> None:
    release = threading.Event()

    async def slow(request: Request) -> Response:
        await anyio.to_thread.run_sync(release.wait, 20)
        return PlainTextResponse("late")

    key = new_key()
    results: list[int] = []
    with serve(gated_app(facilitator, pay_to, slow)) as url:
        first = threading.Thread(
            target=lambda: results.append(agent.pay_url(url + "/paid", key=key).status_code)
        )
        first.start()
        paying = ["paying"]
        until(lambda: [a.status for a in agent.client.spend.attempts().data[:1]] == paying)
        r = agent.pay_url(url + "/paid", key=key)
        assert (r.status_code, r.json()["error"]["code"]) == (409, "idempotency_in_progress")
        assert r.headers["retry-after"] == "1"
        release.set()
        first.join(30)
    assert results == [200]

"""pay-url follows the chain when the paid URL answers an error (issue 14, item 2).

A seller that does not settle on failure (x402's own middleware): the attempt fails with
``upstream_failed`` carrying the URL's status and (cut) body, the reservation is voided,
the wallet keeps its money.  A seller that settles anyway and then answers 500: the
attempt is ``succeeded`` and says so (``unlocked`` false, a ``note``).  The ledger audit
balances either way."""

from __future__ import annotations

from decimal import Decimal

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..rails.helpers import open_rail_shop, receipts_of
from ..sandbox.helpers import serve
from ..support import LiveServer, assert_ledger_sound
from .apps import PRICE, gated_app, settles_then_fails_app
from .helpers import Agent, attempt_row, chain_balance, events, price

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _failing(status: int, body: str) -> object:
    async def handler(request: Request) -> Response:
        return PlainTextResponse(body, status_code=status)

    return handler


@pytest.mark.parametrize("status", [500, 404, 503])
def test_a_paid_url_that_fails_without_settling_charges_nothing(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str, status: int
) -> None:
    body = "the goods are gone " + "x" * 5000
    with serve(gated_app(facilitator, pay_to, _failing(status, body))) as url:  # type: ignore[arg-type]
        r = agent.pay_url(url + "/paid")
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_failed"
    assert f"answered {status}" in error["message"] and "nothing was charged" in error["message"]
    details = error["details"]
    assert details["upstream_status"] == status and details["status"] == "failed"
    assert details["upstream_body"].startswith("the goods are gone")
    assert len(details["upstream_body"]) == 1024 and details["upstream_body_truncated"] is True
    row = attempt_row(server, details["attempt_id"])
    assert (row.status, row.error_code, row.response_status) == (
        "failed",
        "upstream_failed",
        status,
    )
    state = agent.spend()
    assert state.balance == Decimal("10.00") and state.spent_total == Decimal("0")
    assert chain_balance(server, pay_to) == 0
    [failed] = events(server, agent.owner_id, "payment.failed")
    assert (failed["reason"], failed["attempt_id"]) == ("upstream_failed", row.id)
    [listed] = agent.client.spend.attempts().data
    assert listed.status == "failed" and listed.upstream_status == status
    assert listed.error is not None and listed.error.code == "upstream_failed"
    assert_ledger_sound(server)


def test_a_seller_that_settles_then_fails_is_paid_and_says_so(
    server: LiveServer, agent: Agent, facilitator: str, pay_to: str
) -> None:
    with serve(settles_then_fails_app(facilitator, pay_to, PRICE)) as url:
        r = agent.pay_url(url + "/report")
    assert r.status_code == 200, r.text
    paid = r.json()
    assert (paid["status"], paid["unlocked"], paid["upstream_status"]) == ("succeeded", False, 500)
    assert paid["body"] == '{"error":"the upstream broke after you paid"}'
    assert "answered 500" in paid["note"] and "settled" in paid["note"]
    assert paid["tx_hash"] in paid["note"] and "0.25" in paid["note"]
    assert chain_balance(server, pay_to) == PRICE
    assert agent.spend().spent_total == price(PRICE)
    assert attempt_row(server, paid["attempt_id"]).status == "succeeded"
    [listed] = agent.client.spend.attempts().data
    assert listed.status == "succeeded" and listed.upstream_status == 500
    assert listed.note == paid["note"] and listed.error is None
    assert events(server, agent.owner_id, "payment.failed") == []
    assert_ledger_sound(server)


def test_a_paid_url_that_succeeds_has_no_note(
    server: LiveServer, agent: Agent, x402_url: str
) -> None:
    paid = agent.client.spend.pay_url(x402_url)
    assert paid.unlocked is True and paid.note is None
    assert_ledger_sound(server)


@pytest.mark.parametrize("status", [500, 404])
def test_pay_url_to_our_own_gate_whose_upstream_fails_charges_nothing(
    server: LiveServer, agent: Agent, status: int
) -> None:
    """The whole chain of issue 14: a hosted gate verifies and claims, forwards, sees the
    upstream fail and releases; pay-url sees no settlement, voids the reservation, and
    the wallet, the seller and the chain are where they were."""
    upstream = Starlette(routes=[Route("/work", _failing(status, "upstream down"))])  # type: ignore[arg-type]
    with serve(upstream) as upstream_url:
        shop = open_rail_shop(server, upstream_url=f"{upstream_url}/work")
        r = agent.pay_url(shop.resource.gate_url)
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["code"] == "upstream_failed" and f"answered {status}" in error["message"]
    assert error["details"]["upstream_body"] == "upstream down"
    assert attempt_row(server, error["details"]["attempt_id"]).status == "failed"
    state = agent.spend()
    assert state.balance == Decimal("10.00") and state.spent_total == Decimal("0")
    assert receipts_of(server, shop.resource.id) == []
    assert shop.balance().balance == Decimal("0")
    assert_ledger_sound(server)

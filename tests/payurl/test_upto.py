"""pay-url pays x402 ``upto`` (metered) offers under the wallet key's policy (issue 27, item
6): the signed maximum is what the policy checks and the reservation holds; only what the
URL settles on the sandbox chain is spent, counted against the allowance and booked.

The paid URL is a seller's app as x402's docs set one up for ``upto``
(:func:`.apps.metered_app`): x402's own ASGI middleware and ``UptoEvmServerScheme`` over the
sandbox facilitator, naming what it used in ``Settlement-Overrides``.
"""

from __future__ import annotations

import asyncio
import re
import runpy
import uuid
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from reference_server.sandbox import chain
from reference_server.store import tables as t

from ..sandbox.helpers import serve
from ..support import LiveServer, assert_ledger_sound
from .apps import metered_app
from .helpers import attempt_row, chain_balance, hot_address, make_agent

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
MAX = Decimal("0.50")
#: 137 units at 0.001 each, in atomic units.
USED = 137_000


@pytest.fixture
def upto_url(facilitator: str, pay_to: str) -> Iterator[str]:
    with serve(metered_app(facilitator, pay_to, USED)) as url:
        yield url + "/report"


def test_only_the_settled_amount_is_spent(server: LiveServer, upto_url: str, pay_to: str) -> None:
    agent = make_agent(server, allowance="1.00", period="day")
    r = agent.pay_url(upto_url)
    assert r.status_code == 200, r.text
    paid = r.json()
    assert (Decimal(paid["amount"]), Decimal(paid["max_amount"])) == (Decimal("0.137"), MAX)
    assert paid["rail"] == "x402" and paid["unlocked"] is True
    state = agent.spend()
    assert state.balance == Decimal("10.00") - Decimal("0.137")
    assert (state.spent_this_period, state.remaining_allowance) == (
        Decimal("0.137"),
        Decimal("0.863"),
    )
    assert chain_balance(server, pay_to) == USED
    r_ = t.receipts
    with server.ctx.db.read() as conn:
        receipt = conn.execute(select(r_).where(r_.c.id == paid["receipt_id"])).one()
    assert (receipt.amount_micros, receipt.max_amount_micros) == (USED, 500_000)
    [listed] = agent.client.spend.attempts().data
    assert (listed.amount, listed.max_amount) == (Decimal("0.137"), MAX)
    assert_ledger_sound(server)


def test_the_maximum_is_what_max_per_transaction_checks(
    server: LiveServer, upto_url: str, pay_to: str
) -> None:
    agent = make_agent(server, max_per_tx="0.25")
    r = agent.pay_url(upto_url)
    assert (r.status_code, r.json()["error"]["code"]) == (402, "max_per_tx_exceeded")
    row = attempt_row(server, r.json()["error"]["details"]["attempt_id"])
    assert (row.status, row.amount_micros, row.max_amount_micros) == ("failed", 500_000, 500_000)
    assert row.transfer_id is None  # nothing was reserved
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("10.00"), 0)
    assert chain_balance(server, pay_to) == 0
    assert_ledger_sound(server)


@pytest.mark.parametrize(
    "used", [0, 500_001], ids=["settles nothing", "claims more than the maximum"]
)
def test_a_url_that_settles_nothing_or_too_much_spends_nothing(
    server: LiveServer, facilitator: str, pay_to: str, used: int
) -> None:
    """Nothing moved: the reservation is voided, and the authorization is made unusable
    on the chain (its Permit2 nonce spent by a cancellation) so it can never settle."""
    agent = make_agent(server)
    with serve(metered_app(facilitator, pay_to, used)) as url:
        r = agent.pay_url(url + "/report")
    assert r.status_code >= 400, r.text
    row = attempt_row(server, r.json()["error"]["details"]["attempt_id"])
    assert (row.status, row.max_amount_micros) == ("failed", 500_000)
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("10.00"), 0)
    assert chain_balance(server, pay_to) == 0
    with server.ctx.db.read() as conn:
        spent_by = chain.nonce_spent_by(conn, hot_address(server), row.nonce)
    assert spent_by is not None and spent_by[1] == chain.CANCEL
    assert_ledger_sound(server)


@pytest.mark.anyio
async def test_concurrent_calls_never_exceed_the_allowance_by_the_maximum(
    server: LiveServer, upto_url: str, pay_to: str
) -> None:
    """An allowance of 1.20 holds two maxima at once: however many run together, no
    reservation that would pass the allowance at its maximum is made, and what was spent
    (settled amounts only) stays within it."""
    agent = make_agent(server, allowance="1.20", period="day")

    async with httpx.AsyncClient(timeout=120) as http:

        async def one() -> str:
            r = await http.post(
                agent.live.url + "/spend/pay-url",
                json={"url": upto_url},
                headers={
                    "Authorization": f"Bearer {agent.wallet_key}",
                    "Idempotency-Key": str(uuid.uuid4()),
                },
            )
            return "paid" if r.status_code == 200 else r.json()["error"]["code"]

        outcome = Counter(await asyncio.gather(*(one() for _ in range(12))))

    assert set(outcome) <= {"paid", "allowance_exceeded"} and outcome["paid"] >= 2
    spent = Decimal(USED * outcome["paid"]) / 1_000_000
    state = agent.spend()
    assert state.spent_this_period == spent <= Decimal("1.20")
    assert state.balance == Decimal("10.00") - spent
    assert chain_balance(server, pay_to) == USED * outcome["paid"]
    assert_ledger_sound(server)


def test_a_dry_run_shows_the_maximum_and_that_it_is_metered(
    server: LiveServer, upto_url: str, pay_to: str
) -> None:
    agent = make_agent(server, max_per_tx="0.25")
    quote = agent.pay_url(upto_url, dry_run=True).json()
    assert (quote["metered"], Decimal(quote["amount"]), Decimal(quote["max_amount"])) == (
        True,
        MAX,
        MAX,
    )
    assert quote["allowed"] is False and quote["blocked_by"]["code"] == "max_per_tx_exceeded"
    assert chain_balance(server, pay_to) == 0


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pay_url_metered.py"


def test_the_docs_example_runs_as_shown(
    server: LiveServer,
    upto_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/pay-url.md shows docs/examples/pay_url_metered.py verbatim, and it prints what
    its comments say."""
    doc = (EXAMPLE.parents[1] / "pay-url.md").read_text()
    [shown] = re.findall(
        r"<!-- example: docs/examples/pay_url_metered.py -->\n```python\n(.*?)```", doc, re.S
    )
    assert shown == EXAMPLE.read_text()
    agent = make_agent(server, allowance="1.00", period="day")
    for key, value in {
        "SVC_BASE_URL": server.url,
        "SVC_WALLET_KEY": agent.wallet_key,
        "METERED_URL": upto_url,
    }.items():
        monkeypatch.setenv(key, value)
    runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines() == [
        "True 0.50 True",
        "0.137 of at most 0.50",
        "0.137",
    ]

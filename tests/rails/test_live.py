"""``live`` open rails settle through the configured x402 facilitator.

The "configured facilitator" here is a second reference server's sandbox facilitator
(``/sandbox/x402``), on loopback: the live server knows only its URL and the token's
identity, exactly as it would know a real facilitator's.  Without a facilitator, live
gates offer no open rail at all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import svc
from reference_server import Settings

from ..conftest import fresh_database
from ..sandbox.helpers import USDC, assert_chain_sound, transaction
from ..support import TEST_SETTINGS, LiveApp, LiveServer, assert_ledger_sound, start_server
from .helpers import (
    PRICE,
    balance,
    decode,
    event_data,
    events_of,
    funded_payer,
    get,
    new_account,
    open_rail_shop,
    paid_with_credential,
    pay_with,
    receipts_of,
)

pytestmark = pytest.mark.anyio
DEPOSIT = "0x000000000000000000000000000000000000dEaD"


@pytest.fixture
def chain(server: LiveServer) -> LiveServer:
    """The server whose sandbox stands in for the live chain and its facilitator."""
    return server


@pytest.fixture
def live_server(chain: LiveServer, tmp_path: Path) -> Iterator[LiveServer]:
    """A second server, its own database, configured for live with ``chain``'s facilitator."""
    (tmp_path / "live").mkdir()
    with fresh_database(tmp_path / "live") as url:
        settings = Settings(
            **{
                **TEST_SETTINGS,
                "database_url": url,
                "live_facilitator_url": chain.url + "/sandbox/x402",
                "live_chain_id": 84532,
                "live_asset_address": USDC,
                "live_asset_name": "USDC",
                "live_asset_version": "2",
                "live_deposit_address": DEPOSIT,
            }
        )
        live = start_server(settings)
        yield live
        live.stop()
        assert_ledger_sound(live)


async def test_live_gate_settles_through_the_configured_facilitator(
    chain: LiveServer, live_server: LiveServer, protocol: str
) -> None:
    shop = open_rail_shop(live_server, environment="live")
    assert shop.resource.environment == "live"
    unpaid = get(shop.resource.gate_url)
    assert unpaid.status_code == 402
    [accept] = decode(unpaid.headers["payment-required"])["accepts"]
    assert (accept["payTo"], accept["network"]) == (DEPOSIT, "eip155:84532")

    payer = funded_payer(chain)
    before = balance(chain.url, DEPOSIT)
    paid = await pay_with(protocol, shop.resource.gate_url, payer)
    assert paid.status_code == 200, paid.text

    # The tokens moved on the facilitator's chain; the live books credit the seller.
    assert balance(chain.url, payer.address) == 1_000_000 - PRICE
    assert balance(chain.url, DEPOSIT) == before + PRICE
    [receipt] = receipts_of(live_server, shop.resource.id)
    assert (receipt.environment, receipt.rail, receipt.settlement) == (
        "live",
        protocol,
        "processor_deposit",
    )
    assert transaction(chain.url, receipt.tx_hash)["to"] == DEPOSIT
    assert shop.balance().balance == Decimal("0.2475")
    [event] = events_of(live_server, shop.owner_id, "payment.succeeded")
    data = event_data(event, svc.PaymentSucceededData)
    assert (data.environment, data.tx_hash, data.payer) == ("live", receipt.tx_hash, payer.address)
    assert_chain_sound(chain.ctx.db)


async def test_a_live_replay_is_refused(chain: LiveServer, live_server: LiveServer) -> None:
    wallet = new_account().address
    shop = open_rail_shop(live_server, environment="live", payout_wallet=wallet)
    payer = funded_payer(chain)
    paid, credential = await paid_with_credential(shop.resource.gate_url, payer, "x402")
    assert paid.status_code == 200, paid.text
    assert balance(chain.url, wallet) == PRICE and shop.balance().balance == Decimal("0")
    replay = get(shop.resource.gate_url, headers=credential)
    assert replay.status_code == 402
    assert len(receipts_of(live_server, shop.resource.id)) == 1
    assert balance(chain.url, payer.address) == 1_000_000 - PRICE
    assert len(events_of(live_server, shop.owner_id, "payment.failed")) == 1


def test_without_a_facilitator_live_gates_offer_no_open_rail(server: LiveServer) -> None:
    shop = open_rail_shop(server, environment="live")
    r = httpx.get(shop.resource.gate_url)
    assert r.status_code == 402
    assert "payment-required" not in r.headers and "www-authenticate" not in r.headers
    test_shop = open_rail_shop(server)  # the same server still offers them in test
    assert "payment-required" in httpx.get(test_shop.resource.gate_url).headers


async def test_a_live_gate_whose_upstream_fails_charges_nothing(
    chain: LiveServer,
    live_server: LiveServer,
    serve_app: Callable[..., LiveApp],
    protocol: str,
) -> None:
    """Verified through the facilitator, never settled: the upstream answered 500."""

    async def broken(request: Request) -> JSONResponse:
        return JSONResponse({"error": "boom"}, status_code=500)

    upstream = serve_app(Starlette(routes=[Route("/work", broken)]))
    shop = open_rail_shop(live_server, environment="live", upstream_url=f"{upstream.url}/work")
    payer = funded_payer(chain)
    before = balance(chain.url, DEPOSIT)
    failed = await pay_with(protocol, shop.resource.gate_url, payer)
    assert failed.status_code == 500 and failed.json() == {"error": "boom"}
    assert "payment-response" not in failed.headers and "x-svc-receipt" not in failed.headers
    assert balance(chain.url, payer.address) == 1_000_000
    assert balance(chain.url, DEPOSIT) == before
    assert receipts_of(live_server, shop.resource.id) == []
    [event] = events_of(live_server, shop.owner_id, "payment.failed")
    assert (event["reason"], event["status"]) == ("answer_failed", 500)

"""``svc-server devchain`` against real peers: anvil, the committed token, the official
x402 facilitator over HTTP, x402's own client and ``PaymentMiddlewareASGI``; every
balance read on chain with web3."""

from __future__ import annotations

import base64
import json
import signal
from typing import Any

import httpx
import pytest
from eth_account import Account
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from web3 import Web3
from web3.contract import Contract
from x402 import x402Client, x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.http.clients import x402HttpxClient
from x402.http.middleware.fastapi import PaymentMiddlewareASGI
from x402.mechanisms.evm.exact import register_exact_evm_client, register_exact_evm_server
from x402.mechanisms.evm.signers import EthAccountSigner

from reference_server import Settings
from reference_server.devchain import artefact
from reference_server.devchain.chain import PAYER_FUNDS

from ..sandbox.helpers import serve
from ..support import until
from .running import RunningDevchain, start_devchain, stop_devchain

PRICE = 50_000  # $0.05 in the token's 6 decimals

LIVE_SETTINGS = (
    "SVC_LIVE_FACILITATOR_URL",
    "SVC_LIVE_RPC_URL",
    "SVC_LIVE_CHAIN_ID",
    "SVC_LIVE_ASSET_ADDRESS",
    "SVC_LIVE_ASSET_NAME",
    "SVC_LIVE_ASSET_VERSION",
    "SVC_LIVE_DEPOSIT_ADDRESS",
    "SVC_LIVE_HOT_WALLET_KEY",
)


def _token(devchain: RunningDevchain) -> tuple[Web3, Contract]:
    w3 = Web3(Web3.HTTPProvider(devchain.rpc_url))
    return w3, w3.eth.contract(address=devchain.asset, abi=artefact.load()["abi"])


def _gated_app(devchain: RunningDevchain, pay_to: str) -> Starlette:
    """A seller's app as x402's docs set one up, its facilitator the devchain's."""
    facilitator = HTTPFacilitatorClient(FacilitatorConfig(url=devchain.facilitator_url))
    server = x402ResourceServer(facilitator)
    register_exact_evm_server(server, devchain.network)

    async def report(request: Request) -> JSONResponse:
        return JSONResponse({"report": "the goods"})

    app = Starlette(routes=[Route("/report", report)])
    price = {
        "amount": str(PRICE),
        "asset": devchain.asset,
        "extra": {
            "name": devchain.exports["SVC_LIVE_ASSET_NAME"],
            "version": devchain.exports["SVC_LIVE_ASSET_VERSION"],
        },
    }
    accepts = {"scheme": "exact", "payTo": pay_to, "price": price, "network": devchain.network}
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    return app


def _client(devchain: RunningDevchain, payer_key: str) -> x402Client:
    """x402's client, allowed the devchain's token (not one of its built-in assets)."""
    client = x402Client()
    register_exact_evm_client(client, EthAccountSigner(Account.from_key(payer_key)))
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    return client


def test_the_exports_are_valid_live_settings_of_a_funded_chain(
    devchain: RunningDevchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(LIVE_SETTINGS) <= set(devchain.exports)
    for name in LIVE_SETTINGS:
        monkeypatch.setenv(name, devchain.exports[name])
    settings = Settings.from_env()
    assert settings.live_rpc_url == devchain.rpc_url
    assert settings.live_rpc_url.startswith("http://127.0.0.1:")
    assert settings.live_facilitator_url == devchain.facilitator_url

    w3, token = _token(devchain)
    assert w3.eth.chain_id == settings.live_chain_id == 31337
    assert token.functions.decimals().call() == 6
    assert token.functions.name().call() == settings.live_asset_name
    assert token.functions.version().call() == settings.live_asset_version
    hot_wallet = Account.from_key(settings.live_hot_wallet_key).address
    payers = [Account.from_key(devchain.exports[f"DEVCHAIN_PAYER_{n}_KEY"]) for n in (1, 2)]
    for holder in (hot_wallet, *(payer.address for payer in payers)):
        assert token.functions.balanceOf(holder).call() >= PAYER_FUNDS // 2
    assert len({hot_wallet, settings.live_deposit_address, *(p.address for p in payers)}) == 4

    supported = httpx.get(devchain.facilitator_url + "/supported").json()
    assert {"x402Version": 2, "scheme": "exact", "network": "eip155:31337"} in supported["kinds"]


@pytest.mark.anyio
async def test_the_official_x402_client_pays_through_the_devchain_facilitator(
    devchain: RunningDevchain,
) -> None:
    w3, token = _token(devchain)
    payee = Account.create().address
    payer_key = devchain.exports["DEVCHAIN_PAYER_1_KEY"]
    payer = Account.from_key(payer_key).address
    payer_before = token.functions.balanceOf(payer).call()

    with serve(_gated_app(devchain, payee)) as url:
        async with httpx.AsyncClient() as plain:
            assert (await plain.get(url + "/report")).status_code == 402
        async with x402HttpxClient(_client(devchain, payer_key)) as http:
            paid = await http.get(url + "/report")

    assert paid.status_code == 200, paid.text
    assert paid.json() == {"report": "the goods"}
    receipt: dict[str, Any] = json.loads(base64.b64decode(paid.headers["payment-response"]))
    assert (receipt["success"], receipt["network"], receipt["payer"]) == (
        True,
        "eip155:31337",
        payer,
    )
    assert token.functions.balanceOf(payee).call() == PRICE
    assert token.functions.balanceOf(payer).call() == payer_before - PRICE
    settled = w3.eth.get_transaction_receipt(receipt["transaction"])
    assert settled["status"] == 1 and settled["to"] == devchain.asset


def test_the_facilitator_refuses_what_is_not_a_payment_it_settles(
    devchain: RunningDevchain,
) -> None:
    """400 with a reason, not a crash: a body that is no facilitator request, and a payment
    on a network this facilitator does not settle."""
    garbage = httpx.post(devchain.facilitator_url + "/verify", json={"paymentPayload": 1})
    assert garbage.status_code == 400 and garbage.json()["error"] == "invalid_request"

    elsewhere = {"scheme": "exact", "network": "solana:devnet", "asset": devchain.asset}
    requirements = {
        **elsewhere,
        "amount": "1",
        "payTo": Account.create().address,
        "maxTimeoutSeconds": 60,
        "extra": {},
    }
    body = {
        "x402Version": 2,
        "paymentPayload": {"x402Version": 2, "accepted": requirements, "payload": {}},
        "paymentRequirements": requirements,
    }
    for route in ("/verify", "/settle"):
        answer = httpx.post(devchain.facilitator_url + route, json=body)
        assert answer.status_code == 400, answer.text
        assert "solana:devnet" in answer.json()["message"]


def _refused(url: str) -> bool:
    """Whether nothing listens at ``url`` any more (a node that accepted the connection
    and then died under it is still going, not gone)."""
    try:
        httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"})
    except httpx.ConnectError:
        return True
    except httpx.TransportError:
        return False
    return False


def test_ctrl_c_stops_the_facilitator_and_the_node() -> None:
    running = start_devchain()
    assert httpx.get(running.facilitator_url + "/supported").status_code == 200

    assert stop_devchain(running.process, signal.SIGINT) == 0

    assert _refused(running.facilitator_url + "/supported")
    assert _refused(running.rpc_url)


def test_no_node_outlives_a_killed_devchain() -> None:
    """SIGKILL runs no cleanup in the command; the node must go all the same."""
    running = start_devchain()
    assert not _refused(running.rpc_url)

    running.process.kill()
    running.process.wait()

    until(lambda: _refused(running.rpc_url), "the node outlived the devchain", seconds=5)

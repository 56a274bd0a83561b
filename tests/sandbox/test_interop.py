"""Unmodified official SDK code paying through the sandbox facilitator, all on loopback.

* x402: a Starlette app behind x402's own ``PaymentMiddlewareASGI`` (resource server with
  the stock ``exact`` EVM scheme for ``eip155:84532``), paid by x402's httpx client;
* x402 v1: the official v1 client scheme's payload through the official facilitator client;
* pympp: a route wrapped by ``pay(...)`` over ``Mpp(methods=evm.charge(...))`` settling
  through the sandbox facilitator, paid by pympp's own client and by x402's client.

The only sandbox-specific setting anywhere is the facilitator URL.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mpp.client import Mpp as MppClient
from mpp.methods.evm import BASE_SEPOLIA_USDC
from mpp.methods.evm import client as mpp_evm_client
from mpp.methods.evm import server as mpp_evm_server
from mpp.server import Mpp, pay
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from x402 import x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, HTTPFacilitatorClientSync
from x402.http.clients import x402HttpxClient
from x402.http.clients.httpx import x402AsyncTransport
from x402.http.middleware.fastapi import PaymentMiddlewareASGI
from x402.mechanisms.evm.exact import register_exact_evm_server
from x402.mechanisms.evm.exact.v1.client import ExactEvmSchemeV1
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.schemas.v1 import PaymentPayloadV1, PaymentRequirementsV1

from ..rails.helpers import funded_payer, x402_client
from ..support import LiveServer
from .helpers import USDC, Recording, balance, get, new_account, serve, transaction
from .test_routes import assert_chain_sound

PRICE = 250_000  # $0.25 in USDC's 6 decimals


def _x402_gated_app(facilitator_url: str, pay_to: str) -> Starlette:
    """A seller's app exactly as x402's docs set one up for Base Sepolia."""
    server = x402ResourceServer(HTTPFacilitatorClient(FacilitatorConfig(url=facilitator_url)))
    register_exact_evm_server(server, "eip155:84532")

    async def report(request: Request) -> JSONResponse:
        return JSONResponse({"report": "the goods"})

    app = Starlette(routes=[Route("/report", report)])
    app.add_middleware(
        PaymentMiddlewareASGI,
        routes={
            "GET /report": {
                "accepts": {
                    "scheme": "exact",
                    "payTo": pay_to,
                    "price": "$0.25",
                    "network": "eip155:84532",
                }
            }
        },
        server=server,
    )
    return app


def _payment_response(response: httpx.Response) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(response.headers["payment-response"])))


@pytest.fixture
def seller_app(server: LiveServer) -> Iterator[tuple[str, str]]:
    """(URL of an x402-gated app paying to a fresh address, that address)."""
    pay_to = new_account().address
    with serve(_x402_gated_app(server.url + "/sandbox/x402", pay_to)) as url:
        yield url, pay_to


@pytest.mark.anyio
async def test_official_x402_client_pays_an_x402_middleware_app(
    server: LiveServer, seller_app: tuple[str, str]
) -> None:
    url, pay_to = seller_app
    payer = funded_payer(server)

    unpaid = get(url + "/report")
    assert unpaid.status_code == 402 and "payment-required" in unpaid.headers
    challenge = json.loads(base64.b64decode(unpaid.headers["payment-required"]))
    [accept] = challenge["accepts"]
    assert (accept["network"], accept["asset"], accept["amount"]) == (
        "eip155:84532",
        USDC,
        str(PRICE),
    )

    async with x402HttpxClient(x402_client(payer)) as http:
        paid = await http.get(url + "/report")

    assert paid.status_code == 200, paid.text
    assert paid.json() == {"report": "the goods"}
    receipt = _payment_response(paid)
    assert (receipt["success"], receipt["network"], receipt["payer"]) == (
        True,
        "eip155:84532",
        payer.address,
    )
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert balance(server.url, pay_to) == PRICE
    tx = transaction(server.url, receipt["transaction"])
    assert (tx["kind"], tx["from"], tx["to"], tx["value"]) == (
        "transferWithAuthorization",
        payer.address,
        pay_to,
        str(PRICE),
    )
    assert_chain_sound(server)


@pytest.mark.anyio
async def test_a_replayed_payment_signature_is_refused(
    server: LiveServer, seller_app: tuple[str, str]
) -> None:
    url, pay_to = seller_app
    payer = funded_payer(server)
    wire = Recording()
    transport = x402AsyncTransport(x402_client(payer), transport=wire)
    async with httpx.AsyncClient(transport=transport) as http:
        assert (await http.get(url + "/report")).status_code == 200
    [signature] = [
        r.headers["payment-signature"] for r in wire.sent if "payment-signature" in r.headers
    ]

    # The same PAYMENT-SIGNATURE again: the sandbox says the nonce is used, the app 402s.
    replay = get(url + "/report", **{"PAYMENT-SIGNATURE": signature})
    assert replay.status_code == 402
    assert balance(server.url, pay_to) == PRICE
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert_chain_sound(server)


@pytest.mark.anyio
async def test_an_unfunded_x402_client_is_refused_and_nothing_moves(
    server: LiveServer, seller_app: tuple[str, str]
) -> None:
    url, pay_to = seller_app
    payer = new_account()  # never funded
    async with x402HttpxClient(x402_client(payer)) as http:
        refused = await http.get(url + "/report")
    assert refused.status_code == 402
    assert balance(server.url, pay_to) == 0


def test_official_facilitator_client_v1_and_v2_supported(server: LiveServer) -> None:
    """x402 v1 end to end through the official clients: the v1 scheme signs a
    ``base-sepolia`` payload, the official sync facilitator client verifies and settles."""
    payer, pay_to = funded_payer(server), new_account().address
    requirements = PaymentRequirementsV1(
        scheme="exact",
        network="base-sepolia",
        max_amount_required="10000",
        resource="http://127.0.0.1/report",
        pay_to=pay_to,
        max_timeout_seconds=300,
        asset=USDC,
        extra={"name": "USDC", "version": "2"},
    )
    inner = ExactEvmSchemeV1(EthAccountSigner(payer)).create_payment_payload(requirements)
    payload = PaymentPayloadV1(scheme="exact", network="base-sepolia", payload=inner)
    with HTTPFacilitatorClientSync(FacilitatorConfig(url=server.url + "/sandbox/x402")) as fac:
        kinds = {(k.x402_version, k.network) for k in fac.get_supported().kinds}
        assert kinds == {(2, "eip155:84532"), (1, "base-sepolia")}
        verified = fac.verify(payload, requirements)
        assert verified.is_valid, verified
        settled = fac.settle(payload, requirements)
        assert settled.success and settled.network == "base-sepolia", settled
        again = fac.settle(payload, requirements)
    assert (again.success, again.error_reason) == (False, "invalid_exact_evm_nonce_already_used")
    assert balance(server.url, pay_to) == 10_000


def _mpp_gated_app(facilitator_url: str, pay_to: str) -> Starlette:
    """A pympp seller: one endpoint serving native MPP and x402 ``exact`` clients."""
    mpp = Mpp(
        methods=mpp_evm_server.charge(
            currency=BASE_SEPOLIA_USDC,
            recipient=pay_to,
            facilitator=facilitator_url,
            route_binding="resource",  # accept standard x402 clients too
        ),
        secret_key="sandbox-interop-test-secret-0123456789",
        realm="127.0.0.1",
    )

    @pay(mpp.charge(amount="0.25"))
    async def report(request: Request, credential: Any, receipt: Any) -> JSONResponse:
        return JSONResponse({"report": "the goods", "reference": receipt.reference})

    return Starlette(routes=[Route("/report", report)])


@pytest.fixture
def mpp_app(server: LiveServer) -> Iterator[tuple[str, str]]:
    pay_to = new_account().address
    with serve(_mpp_gated_app(server.url + "/sandbox/x402", pay_to)) as url:
        yield url, pay_to


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::UserWarning")
async def test_pympp_client_pays_a_pympp_server(
    server: LiveServer, mpp_app: tuple[str, str]
) -> None:
    url, pay_to = mpp_app
    payer = funded_payer(server)

    unpaid = get(url + "/report")
    assert unpaid.status_code == 402
    assert unpaid.headers["www-authenticate"].startswith("Payment ")
    assert "payment-required" in unpaid.headers  # the x402 challenge, same endpoint

    method = mpp_evm_client.charge(currency=BASE_SEPOLIA_USDC, account=payer)
    async with MppClient(methods=[method]) as client:
        paid = await client.fetch(url + "/report")

    assert paid.status_code == 200, paid.text
    assert "payment-receipt" in paid.headers
    reference = paid.json()["reference"]
    assert balance(server.url, payer.address) == 1_000_000 - PRICE
    assert balance(server.url, pay_to) == PRICE
    tx = transaction(server.url, reference)
    assert (tx["from"], tx["to"], tx["value"]) == (payer.address, pay_to, str(PRICE))
    assert_chain_sound(server)


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore::UserWarning")
async def test_official_x402_client_pays_a_pympp_server(
    server: LiveServer, mpp_app: tuple[str, str]
) -> None:
    url, pay_to = mpp_app
    payer = funded_payer(server)
    async with x402HttpxClient(x402_client(payer)) as http:
        paid = await http.get(url + "/report")
    assert paid.status_code == 200, paid.text
    receipt = _payment_response(paid)
    assert receipt["success"] is True and receipt["transaction"] == paid.json()["reference"]
    assert balance(server.url, pay_to) == PRICE
    assert_chain_sound(server)

"""x402's ``upto`` scheme on the devchain, all of it official x402 but the two contracts:
x402's client signs a Permit2 authorization for a maximum, x402's server scheme builds the
requirements from the facilitator's ``/supported``, the devchain's facilitator (x402's own)
verifies it and settles the metered amount through the upto proxy and Permit2 the devchain
places at their canonical addresses.  Every balance is read on chain."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from web3.contract import Contract
from web3.exceptions import ContractLogicError
from x402 import x402Client, x402ClientSync, x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.http.clients import x402HttpxClient
from x402.http.middleware.fastapi import PaymentMiddlewareASGI
from x402.mechanisms.evm.constants import (
    PERMIT2_ADDRESS,
    X402_UPTO_PERMIT2_PROXY_ABI,
    X402_UPTO_PERMIT2_PROXY_ADDRESS,
)
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.mechanisms.evm.types import UptoPermit2Payload
from x402.mechanisms.evm.upto import UptoEvmClientScheme, UptoEvmServerScheme
from x402.mechanisms.evm.upto.permit2_utils import _build_upto_permit2_settle_args
from x402.schemas import PaymentPayload, PaymentRequired, PaymentRequirements, SupportedKind

from reference_server.devchain import artefact
from reference_server.devchain.chain import mnemonic_key

from ..payurl.helpers import make_agent
from ..sandbox.helpers import serve
from ..support import LiveServer
from .running import RunningDevchain

MAX = 500_000  # $0.50, what the payer signs for
USED = 20_000  # $0.02, what the seller settles

Client = TypeVar("Client", x402Client, x402ClientSync)


def _supported_upto(devchain: RunningDevchain) -> SupportedKind:
    kinds = httpx.get(devchain.facilitator_url + "/supported").json()["kinds"]
    (kind,) = [k for k in kinds if k["scheme"] == "upto" and k["network"] == devchain.network]
    return SupportedKind.model_validate(kind)


def _requirements(devchain: RunningDevchain, pay_to: str) -> PaymentRequirements:
    """What a seller offers for metered use: at most ``MAX``, completed by x402's upto
    server scheme from the facilitator's ``/supported`` kind, as ``x402ResourceServer``
    completes it."""
    offered = PaymentRequirements(
        scheme="upto",
        network=devchain.network,
        asset=devchain.asset,
        amount=str(MAX),
        pay_to=pay_to,
        max_timeout_seconds=300,
        extra={
            "name": devchain.exports["SVC_LIVE_ASSET_NAME"],
            "version": devchain.exports["SVC_LIVE_ASSET_VERSION"],
        },
    )
    return UptoEvmServerScheme().enhance_payment_requirements(
        offered, _supported_upto(devchain), []
    )


def _paying(devchain: RunningDevchain, payer_key: str, client: Client) -> Client:
    """x402's own client paying ``upto`` from ``payer_key`` (the devchain token allowed
    explicitly: it is none of x402's built-in assets)."""
    client.register(
        devchain.network, UptoEvmClientScheme(EthAccountSigner(Account.from_key(payer_key)))
    )
    client.set_spend_controls(
        {"allowed_assets": [{"network": devchain.network, "asset": devchain.asset}]}
    )
    return client


def _payment(devchain: RunningDevchain, payer_key: str, wanted: PaymentRequirements) -> Any:
    """What x402's client signs for ``wanted``."""
    client = _paying(devchain, payer_key, x402ClientSync())
    return client.create_payment_payload(PaymentRequired(accepts=[wanted]))


def _post(devchain: RunningDevchain, route: str, payment: Any, wanted: PaymentRequirements) -> Any:
    body = {
        "x402Version": 2,
        "paymentPayload": payment.model_dump(by_alias=True, exclude_none=True),
        "paymentRequirements": wanted.model_dump(by_alias=True, exclude_none=True),
    }
    answer = httpx.post(devchain.facilitator_url + route, json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _charging(wanted: PaymentRequirements, micros: int) -> PaymentRequirements:
    """The same requirements, settling ``micros``: how a seller settles metered use."""
    return wanted.model_copy(update={"amount": str(micros)})


def _permit2(devchain: RunningDevchain) -> Contract:
    w3 = devchain.web3()
    return w3.eth.contract(address=PERMIT2_ADDRESS, abi=artefact.load("permit2")["abi"])


def _nonce_used(devchain: RunningDevchain, payment: PaymentPayload) -> bool:
    authorization = payment.payload["permit2Authorization"]
    nonce, owner = int(authorization["nonce"]), authorization["from"]
    word = _permit2(devchain).functions.nonceBitmap(owner, nonce >> 8).call()
    return bool(word >> (nonce & 0xFF) & 1)


def _payer(devchain: RunningDevchain) -> str:
    return devchain.exports["DEVCHAIN_PAYER_2_KEY"]


def test_the_devchain_places_permit2_and_the_upto_proxy_and_approves_permit2(
    devchain: RunningDevchain,
) -> None:
    w3 = devchain.web3()
    for address in (PERMIT2_ADDRESS, X402_UPTO_PERMIT2_PROXY_ADDRESS):
        assert w3.eth.get_code(w3.to_checksum_address(address))
    # Permit2's EIP-712 domain is the one x402's clients sign over: name, chain, address.
    domain = {"name": "Permit2", "chainId": devchain.chain_id, "verifyingContract": PERMIT2_ADDRESS}
    expected = encode_typed_data(domain, {"Nothing": []}, {}).header
    assert _permit2(devchain).functions.DOMAIN_SEPARATOR().call() == expected
    unlimited = 2**256 - 1
    for number in (1, 2):
        payer = Account.from_key(devchain.exports[f"DEVCHAIN_PAYER_{number}_KEY"]).address
        assert devchain.token().functions.allowance(payer, PERMIT2_ADDRESS).call() == unlimited
    kind = _supported_upto(devchain)
    facilitator = Account.from_key(mnemonic_key(1)).address
    assert (kind.x402_version, kind.extra) == (2, {"facilitatorAddress": facilitator})


def test_the_official_upto_client_pays_the_metered_amount_once(
    devchain: RunningDevchain,
) -> None:
    payee = Account.create().address
    payer = Account.from_key(_payer(devchain)).address
    wanted = _requirements(devchain, payee)
    assert wanted.extra["assetTransferMethod"] == "permit2"
    payment = _payment(devchain, _payer(devchain), wanted)
    authorization = payment.payload["permit2Authorization"]
    assert authorization["spender"] == X402_UPTO_PERMIT2_PROXY_ADDRESS
    assert authorization["permitted"]["amount"] == str(MAX)
    before = devchain.balance(payer)

    verified = _post(devchain, "/verify", payment, wanted)
    assert verified == {"isValid": True, "payer": payer}, verified
    settled = _post(devchain, "/settle", payment, _charging(wanted, USED))

    assert settled["success"] is True, settled
    assert (settled["payer"], settled["amount"]) == (payer, str(USED))
    assert devchain.balance(payer) == before - USED
    assert devchain.balance(payee) == USED
    receipt = devchain.web3().eth.get_transaction_receipt(settled["transaction"])
    assert receipt["status"] == 1 and receipt["to"] == X402_UPTO_PERMIT2_PROXY_ADDRESS
    assert _nonce_used(devchain, payment)

    replayed = _post(devchain, "/settle", payment, _charging(wanted, USED))
    # Refused before anything is sent: the facilitator simulates the settlement, and
    # Permit2 finds the nonce spent.
    failed = "invalid_upto_evm_transaction_failed"
    assert (replayed["success"], replayed["errorReason"], replayed["transaction"]) == (
        False,
        failed,
        "",
    )
    reverified = _post(devchain, "/verify", payment, wanted)
    assert (reverified["isValid"], reverified["invalidReason"]) == (False, failed)
    assert devchain.balance(payer) == before - USED
    assert devchain.balance(payee) == USED


def test_a_settlement_above_the_signed_maximum_is_refused(devchain: RunningDevchain) -> None:
    payee = Account.create().address
    payer = Account.from_key(_payer(devchain)).address
    wanted = _requirements(devchain, payee)
    payment = _payment(devchain, _payer(devchain), wanted)
    before = devchain.balance(payer)

    refused = _post(devchain, "/settle", payment, _charging(wanted, MAX + 1))

    assert refused["success"] is False
    assert refused["errorReason"] == "invalid_upto_evm_payload_settlement_exceeds_amount"
    assert (devchain.balance(payer), devchain.balance(payee)) == (before, 0)
    assert not _nonce_used(devchain, payment)


@pytest.mark.parametrize(
    ("caller", "micros", "reason"),
    [
        ("facilitator", MAX + 1, "AmountExceedsPermitted"),
        ("stranger", USED, "UnauthorizedFacilitator"),
        ("facilitator", 0, "InvalidAmount"),
    ],
)
def test_the_proxy_itself_refuses_what_the_signature_does_not_allow(
    devchain: RunningDevchain, caller: str, micros: int, reason: str
) -> None:
    """The contracts, not only the facilitator's checks in front of them: a call above the
    maximum, from another settler than the witness names, or of nothing, reverts."""
    payment = _payment(
        devchain, _payer(devchain), _requirements(devchain, Account.create().address)
    )
    authorization = UptoPermit2Payload.from_dict(payment.payload)
    proxy = devchain.web3().eth.contract(
        address=X402_UPTO_PERMIT2_PROXY_ADDRESS, abi=X402_UPTO_PERMIT2_PROXY_ABI
    )
    facilitator = Account.from_key(mnemonic_key(1)).address
    sender = facilitator if caller == "facilitator" else Account.create().address
    allowed = _build_upto_permit2_settle_args(authorization, USED)
    asked = _build_upto_permit2_settle_args(authorization, micros)

    # eth_call only: nothing is sent.  The allowed call passes, so each refusal is its own.
    proxy.functions.settle(*allowed).call({"from": facilitator})
    with pytest.raises(ContractLogicError, match=reason):
        proxy.functions.settle(*asked).call({"from": sender})


def test_permit2_refuses_a_payee_the_payer_did_not_sign_for(devchain: RunningDevchain) -> None:
    """The witness is hashed into what the payer signed: the facilitator cannot redirect
    the money by changing ``to``."""
    payment = _payment(
        devchain, _payer(devchain), _requirements(devchain, Account.create().address)
    )
    permit, amount, owner, (_, facilitator, valid_after), signature = (
        _build_upto_permit2_settle_args(UptoPermit2Payload.from_dict(payment.payload), USED)
    )
    proxy = devchain.web3().eth.contract(
        address=X402_UPTO_PERMIT2_PROXY_ADDRESS, abi=X402_UPTO_PERMIT2_PROXY_ABI
    )
    redirected = (Account.create().address, facilitator, valid_after)

    with pytest.raises(ContractLogicError, match="InvalidSigner"):
        proxy.functions.settle(permit, amount, owner, redirected, signature).call(
            {"from": facilitator}
        )


def test_a_zero_settlement_moves_nothing(devchain: RunningDevchain) -> None:
    payee = Account.create().address
    payer = Account.from_key(_payer(devchain)).address
    wanted = _requirements(devchain, payee)
    payment = _payment(devchain, _payer(devchain), wanted)
    before = devchain.balance(payer)

    settled = _post(devchain, "/settle", payment, _charging(wanted, 0))

    assert settled["success"] is True, settled
    assert (settled["transaction"], settled["amount"]) == ("", "0")
    assert (devchain.balance(payer), devchain.balance(payee)) == (before, 0)
    # No transaction, so the authorization is still unspent on chain: a seller must treat
    # a zero settlement as the end of the payment itself.
    assert not _nonce_used(devchain, payment)


def _metered_app(devchain: RunningDevchain, pay_to: str) -> Starlette:
    """A seller's app as x402's docs set one up for ``upto``: it asks for at most ``MAX``
    and, once it knows what was used, says so in the ``Settlement-Overrides`` header,
    which x402's middleware strips and settles instead of the maximum."""
    server = x402ResourceServer(
        HTTPFacilitatorClient(FacilitatorConfig(url=devchain.facilitator_url))
    )
    server.register(devchain.network, UptoEvmServerScheme())

    async def report(request: Request) -> JSONResponse:
        overrides = json.dumps({"amount": str(USED)})
        return JSONResponse({"report": "metered"}, headers={"Settlement-Overrides": overrides})

    app = Starlette(routes=[Route("/report", report)])
    price = {
        "amount": str(MAX),
        "asset": devchain.asset,
        "extra": {
            "name": devchain.exports["SVC_LIVE_ASSET_NAME"],
            "version": devchain.exports["SVC_LIVE_ASSET_VERSION"],
        },
    }
    accepts = {"scheme": "upto", "payTo": pay_to, "price": price, "network": devchain.network}
    app.add_middleware(
        PaymentMiddlewareASGI, routes={"GET /report": {"accepts": accepts}}, server=server
    )
    return app


@pytest.mark.anyio
async def test_x402s_middleware_settles_what_the_seller_metered(
    devchain: RunningDevchain,
) -> None:
    payee = Account.create().address
    payer = Account.from_key(_payer(devchain))
    client = _paying(devchain, _payer(devchain), x402Client())
    before = devchain.balance(payer.address)

    with serve(_metered_app(devchain, payee)) as url:
        async with x402HttpxClient(client) as http:
            paid = await http.get(url + "/report")

    assert paid.status_code == 200, paid.text
    assert paid.json() == {"report": "metered"}
    assert "settlement-overrides" not in paid.headers
    receipt = json.loads(base64.b64decode(paid.headers["payment-response"]))
    assert (receipt["success"], receipt["amount"], receipt["payer"]) == (
        True,
        str(USED),
        payer.address,
    )
    assert devchain.balance(payer.address) == before - USED
    assert devchain.balance(payee) == USED


def test_pay_url_spends_what_the_seller_metered_on_chain(
    devchain: RunningDevchain, make_server: Callable[..., LiveServer]
) -> None:
    """Live pay-url on the devchain: the hot wallet (which approved Permit2 at start) signs
    the maximum, the seller settles ``USED`` through the upto proxy, the node confirms the
    transfer (``live_rpc_url``), and the wallet key is charged ``USED`` only."""
    server = make_server(**devchain.live_settings())
    agent = make_agent(server, environment="live")
    payee = Account.create().address
    with serve(_metered_app(devchain, payee)) as url:
        r = agent.pay_url(url + "/report")
    assert r.status_code == 200, r.text
    paid = r.json()
    assert (paid["amount"], paid["max_amount"]) == ("0.02", "0.50")
    assert devchain.balance(payee) == USED
    state = agent.spend()
    assert (state.balance, state.spent_total) == (Decimal("9.98"), Decimal("0.02"))

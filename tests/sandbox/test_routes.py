"""The sandbox routes on a live server: faucet, balances, transactions, and the x402
facilitator's wire shapes (v2 and v1), refusals included."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from reference_server.sandbox import chain
from reference_server.store import tables as t

from ..support import LiveServer
from .helpers import (
    NETWORK,
    USDC,
    authorization,
    balance,
    fund,
    new_account,
    requirements,
    sign,
    x402_body,
)

SANDBOX_GETS = [
    "/sandbox/x402/supported",
    "/sandbox/balances/0x857b06519E91e3A54538791bDbb0E22373e36b66",
    "/sandbox/transactions/0x" + "ab" * 32,
]
SANDBOX_POSTS = ["/sandbox/faucet", "/sandbox/x402/verify", "/sandbox/x402/settle"]


def assert_chain_sound(live: LiveServer) -> None:
    with live.ctx.db.read() as conn:
        assert chain.audit(conn) == []


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["code"] == code, body
    assert body["request_id"] == r.headers["x-request-id"]
    return body


def test_supported_names_exact_v2_and_v1_and_upto_on_base_sepolia(server: LiveServer) -> None:
    for prefix in ("", "/api"):
        r = httpx.get(f"{server.url}{prefix}/sandbox/x402/supported")
        assert r.status_code == 200
        body = r.json()
        [signer] = body["signers"]["eip155:*"]
        assert signer.startswith("0x") and len(signer) == 42
        assert body["kinds"] == [
            {"x402Version": 2, "scheme": "exact", "network": "eip155:84532"},
            {"x402Version": 1, "scheme": "exact", "network": "base-sepolia"},
            {
                "x402Version": 2,
                "scheme": "upto",
                "network": "eip155:84532",
                "extra": {"facilitatorAddress": signer},
            },
        ]
        assert body["extensions"] == []


def test_faucet_mints_to_any_address_and_balances_show_it(server: LiveServer) -> None:
    who = new_account()
    r = httpx.post(
        server.url + "/sandbox/faucet", json={"address": who.address.lower(), "amount": "12.5"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["address"] == who.address  # checksummed
    assert (body["amount"], body["balance"], body["balance_atomic"]) == (
        "12.50",
        "12.50",
        "12500000",
    )
    assert (body["network"], body["asset"], body["decimals"]) == (NETWORK, USDC, 6)
    fund(server.url, who.address, "0.000001")
    r = httpx.get(f"{server.url}/sandbox/balances/{who.address}")
    assert r.json()["balance"] == "12.500001" and r.json()["balance_atomic"] == "12500001"
    tx = httpx.get(f"{server.url}/sandbox/transactions/{body['transaction']}").json()
    assert (tx["kind"], tx["to"], tx["value"]) == ("mint", who.address, "12500000")
    assert tx["from"] == "0x" + "0" * 40 and tx["block_number"] == body["block_number"]
    # Never-funded addresses hold nothing.
    assert balance(server.url, new_account().address) == 0
    assert_chain_sound(server)


def test_faucet_is_idempotent_with_a_key(server: LiveServer) -> None:
    who = new_account()
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    body = {"address": who.address, "amount": "3"}
    first, again = (
        httpx.post(server.url + "/sandbox/faucet", json=body, headers=headers) for _ in range(2)
    )
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["transaction"] == first.json()["transaction"]
    assert balance(server.url, who.address) == 3_000_000


LOWER = "0x857b06519e91e3a54538791bdbb0e22373e36b66"  # a valid address, not checksummed


@pytest.mark.parametrize(
    "body, field",
    [
        ({"address": "0x1234", "amount": "1"}, "address"),
        ({"address": "0x857b06519E91e3A54538791bDbb0E22373e36B66", "amount": "1"}, "address"),
        ({"amount": "1"}, "address"),
        ({"address": LOWER, "amount": "1000.000001"}, "amount"),
        ({"address": LOWER, "amount": "0"}, "amount"),
        ({"address": LOWER, "amount": 5}, "amount"),
        ({"address": LOWER, "amount": "1e3"}, "amount"),
        ({"address": LOWER}, "amount"),
        ({"address": LOWER, "amount": "1", "to": "x"}, "to"),
    ],
    ids=[
        "short-address",
        "bad-checksum",
        "no-address",
        "over-cap",
        "zero",
        "json-number",
        "exponent",
        "no-amount",
        "unknown-field",
    ],
)
def test_faucet_refuses_bad_input(server: LiveServer, body: dict[str, Any], field: str) -> None:
    r = httpx.post(server.url + "/sandbox/faucet", json=body)
    errors = _error(r, 422, "validation_error")["error"]["details"]["errors"]
    assert field in {e["field"] for e in errors}


def test_faucet_cap_is_configurable(make_server: Callable[..., LiveServer]) -> None:
    live = make_server(sandbox_faucet_max_micros=5_000_000)
    who = new_account().address
    r = httpx.post(live.url + "/sandbox/faucet", json={"address": who, "amount": "5.01"})
    assert "at most 5.00" in _error(r, 422, "validation_error")["error"]["message"]
    fund(live.url, who, "5")


@pytest.mark.parametrize("path", SANDBOX_GETS + SANDBOX_POSTS)
def test_every_sandbox_route_refuses_live(server: LiveServer, path: str) -> None:
    headers = {"X-Svc-Environment": "live"}
    if path in SANDBOX_POSTS:
        body = {"address": new_account().address, "amount": "1"}
        r = httpx.post(server.url + path, json=body, headers=headers)
    else:
        r = httpx.get(server.url + path, headers=headers)
    assert "only in the test environment" in _error(r, 404, "sandbox_test_only")["error"]["message"]
    # An explicit test header is the same as none.
    if path in SANDBOX_GETS[:2]:
        assert httpx.get(server.url + path, headers={"X-Svc-Environment": "test"}).is_success


def test_live_faucet_mints_nothing(server: LiveServer) -> None:
    who = new_account().address
    httpx.post(
        server.url + "/sandbox/faucet",
        json={"address": who, "amount": "1"},
        headers={"X-Svc-Environment": "live"},
    )
    assert balance(server.url, who) == 0


def test_sandbox_can_be_switched_off(make_server: Callable[..., LiveServer]) -> None:
    live = make_server(sandbox_enabled=False)
    _error(httpx.get(live.url + "/sandbox/x402/supported"), 404, "not_found")
    r = httpx.post(
        live.url + "/sandbox/faucet", json={"address": new_account().address, "amount": "1"}
    )
    _error(r, 404, "not_found")
    assert "/sandbox/" not in httpx.get(live.url + "/llms.txt").text


def test_sandbox_routes_are_discoverable(server: LiveServer) -> None:
    text = httpx.get(server.url + "/llms.txt").text
    assert "POST /sandbox/faucet" in text and "POST /sandbox/x402/settle" in text


def test_bad_lookups(server: LiveServer) -> None:
    _error(httpx.get(server.url + "/sandbox/balances/0x12"), 422, "validation_error")
    _error(httpx.get(server.url + "/sandbox/transactions/0x" + "ab" * 32), 404, "not_found")
    _error(httpx.get(server.url + "/sandbox/transactions/nope"), 404, "not_found")


def _post(live: LiveServer, op: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{live.url}/sandbox/x402/{op}", json=body)
    assert r.status_code == 200, r.text  # facilitator clients read only 200 answers
    return r.json()


def test_verify_then_settle_then_replay(server: LiveServer) -> None:
    payer, payee = new_account(), new_account()
    fund(server.url, payer.address, "2")
    signed = sign(payer, authorization(payer, payee.address, 1_500_000))
    body = x402_body(signed)

    verified = _post(server, "verify", body)
    assert verified["isValid"] is True and verified["payer"] == payer.address
    assert "invalidReason" not in verified
    assert balance(server.url, payer.address) == 2_000_000  # verify moves nothing

    settled = _post(server, "settle", body)
    assert settled["success"] is True
    assert (settled["payer"], settled["network"], settled["amount"]) == (
        payer.address,
        NETWORK,
        "1500000",
    )
    assert settled["transaction"].startswith("0x") and len(settled["transaction"]) == 66
    assert "errorReason" not in settled
    assert balance(server.url, payer.address) == 500_000
    assert balance(server.url, payee.address) == 1_500_000
    tx = httpx.get(f"{server.url}/sandbox/transactions/{settled['transaction']}").json()
    assert (tx["kind"], tx["from"], tx["to"], tx["value"], tx["nonce"]) == (
        "transferWithAuthorization",
        payer.address,
        payee.address,
        "1500000",
        signed.authorization["nonce"],
    )

    # The same credential again pays nothing: refused with the used-nonce reason.
    replay = _post(server, "settle", body)
    assert replay == {
        "ok": True,
        "success": False,
        "errorReason": "invalid_exact_evm_nonce_already_used",
        "errorMessage": replay["errorMessage"],
        "payer": payer.address,
        "transaction": "",
        "network": NETWORK,
        "request_id": replay["request_id"],
    }
    assert settled["transaction"] in replay["errorMessage"]
    again = _post(server, "verify", body)
    assert (again["isValid"], again["invalidReason"]) == (
        False,
        "invalid_exact_evm_nonce_already_used",
    )
    assert balance(server.url, payer.address) == 500_000
    assert_chain_sound(server)


def test_the_sandbox_never_touches_the_ledger(server: LiveServer) -> None:
    def ledger_rows() -> tuple[int, int]:
        with server.ctx.db.read() as conn:
            return (
                conn.execute(select(func.count()).select_from(t.ledger_accounts)).scalar_one(),
                conn.execute(select(func.count()).select_from(t.ledger_transfers)).scalar_one(),
            )

    before = ledger_rows()
    payer, payee = new_account(), new_account()
    fund(server.url, payer.address, "1")
    signed = sign(payer, authorization(payer, payee.address, 1_000_000))
    assert _post(server, "settle", x402_body(signed))["success"] is True
    assert ledger_rows() == before


_Case = tuple[dict[str, Any], str]


def _case(name: str, payer: Any, payee: Any) -> _Case:
    """A verify/settle body that must be refused, and the reason."""
    signed = sign(payer, authorization(payer, payee.address, 1_000_000))
    found = (
        _signature_case(name, payer, payee, signed)
        or _requirements_case(name, x402_body(signed))
        or _payload_case(name, x402_body(signed))
    )
    if found is None:
        raise AssertionError(name)
    return found


def _signature_case(name: str, payer: Any, payee: Any, signed: Any) -> _Case | None:
    """Refused for what was signed: its validity window, value, signer, chain or payee."""
    now = int(time.time())
    if name == "expired":
        auth = authorization(payer, payee.address, 1_000_000, valid_before=now - 1)
        return x402_body(sign(payer, auth)), "invalid_exact_evm_payload_authorization_valid_before"
    if name == "not-yet-valid":
        auth = authorization(payer, payee.address, 1_000_000, valid_after=now + 300)
        return x402_body(sign(payer, auth)), "invalid_exact_evm_payload_authorization_valid_after"
    if name == "insufficient":
        auth = authorization(payer, payee.address, 50_000_000)
        return x402_body(sign(payer, auth)), "invalid_exact_evm_insufficient_balance"
    if name == "wrong-signer":
        thief = new_account()
        return x402_body(sign(thief, signed.authorization)), "invalid_exact_evm_payload_signature"
    if name == "tampered-value":
        body = x402_body(signed, amount=2_000_000)
        body["paymentPayload"]["payload"]["authorization"]["value"] = "2000000"
        return body, "invalid_exact_evm_payload_signature"
    if name == "wrong-chain":
        auth = authorization(payer, payee.address, 1_000_000)
        domain = {"name": "USDC", "version": "2", "chainId": 8453, "verifyingContract": USDC}
        return x402_body(sign(payer, auth, domain)), "invalid_exact_evm_payload_signature"
    if name == "recipient":
        body = x402_body(signed, pay_to=new_account().address)
        return body, "invalid_exact_evm_payload_recipient_mismatch"
    if name == "value":
        return x402_body(signed, amount=999_999), (
            "invalid_exact_evm_payload_authorization_value_mismatch"
        )
    return None


def _requirements_case(name: str, body: dict[str, Any]) -> _Case | None:
    """Refused for what the requirements (or the payload's echo of them) ask."""
    req = body["paymentRequirements"]
    inner = body["paymentPayload"]
    if name == "network":
        req["network"] = inner["accepted"]["network"] = "eip155:8453"
        return body, "invalid_network"
    if name == "accepted-network":
        inner["accepted"] = {**inner["accepted"], "network": "eip155:1"}
        return body, "network_mismatch"
    if name == "scheme":
        req["scheme"] = "subscription"  # no such scheme here (exact and upto are)
        return body, "unsupported_scheme"
    if name == "asset":
        req["asset"] = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
        return body, "invalid_payment_requirements"
    if name == "token-name":
        req["extra"] = {"name": "USD Coin", "version": "2"}
        return body, "invalid_exact_evm_token_name_mismatch"
    if name == "token-version":
        req["extra"] = {"name": "USDC", "version": "1"}
        return body, "invalid_exact_evm_token_version_mismatch"
    if name == "version":
        body["x402Version"] = 3
        return body, "invalid_x402_version"
    if name == "no-requirements":
        body["paymentRequirements"] = "exact"
        return body, "invalid_payment_requirements"
    return None


def _payload_case(name: str, body: dict[str, Any]) -> _Case | None:
    """Refused for the payload's shape: missing, malformed, unsigned or not EIP-3009."""
    inner = body["paymentPayload"]
    if name == "no-payload":
        del body["paymentPayload"]
        return body, "invalid_payload"
    if name == "malformed-authorization":
        inner["payload"]["authorization"]["nonce"] = "0x12"
        return body, "invalid_payload"
    if name == "permit2":
        inner["payload"] = {"signature": "0x00", "permit2Authorization": {}}
        return body, "invalid_payload"
    if name == "no-signature":
        del inner["payload"]["signature"]
        return body, "invalid_exact_evm_payload_signature"
    return None


CASES = [
    "expired",
    "not-yet-valid",
    "insufficient",
    "wrong-signer",
    "tampered-value",
    "wrong-chain",
    "recipient",
    "value",
    "network",
    "accepted-network",
    "scheme",
    "asset",
    "token-name",
    "token-version",
    "version",
    "no-payload",
    "no-requirements",
    "malformed-authorization",
    "permit2",
    "no-signature",
]


@pytest.mark.parametrize("name", CASES)
def test_refusals_have_the_x402_reason_and_move_nothing(server: LiveServer, name: str) -> None:
    payer, payee = new_account(), new_account()
    fund(server.url, payer.address, "10")
    body, reason = _case(name, payer, payee)
    verified = _post(server, "verify", body)
    assert (verified["isValid"], verified["invalidReason"]) == (False, reason), verified
    assert verified["invalidMessage"]
    settled = _post(server, "settle", body)
    assert (settled["success"], settled["errorReason"]) == (False, reason), settled
    assert settled["transaction"] == "" and settled["network"] and settled["errorMessage"]
    if name not in ("no-payload", "permit2"):
        assert settled["payer"].lower() == payer.address.lower() or name == "wrong-signer"
    assert balance(server.url, payer.address) == 10_000_000
    assert balance(server.url, payee.address) == 0


def test_a_body_that_is_not_json_is_a_plain_400(server: LiveServer) -> None:
    r = httpx.post(
        server.url + "/sandbox/x402/verify",
        content=b"[1]",
        headers={"Content-Type": "application/json"},
    )
    _error(r, 400, "invalid_json")


def test_x402_v1_wire_shapes(server: LiveServer) -> None:
    """x402 v1: legacy network name, scheme/network on the payload, maxAmountRequired."""
    payer, payee = new_account(), new_account()
    fund(server.url, payer.address, "1")
    signed = sign(payer, authorization(payer, payee.address, 10_000))
    req = {
        **requirements(payee.address, 10_000),
        "network": "base-sepolia",
        "maxAmountRequired": "10000",
        "resource": "http://127.0.0.1/paid",
    }
    del req["amount"]
    body = {
        "x402Version": 1,
        "paymentPayload": {
            "x402Version": 1,
            "scheme": "exact",
            "network": "base-sepolia",
            "payload": signed.payload,
        },
        "paymentRequirements": req,
    }
    assert _post(server, "verify", body)["isValid"] is True
    settled = _post(server, "settle", body)
    assert (settled["success"], settled["network"], settled["amount"]) == (
        True,
        "base-sepolia",
        "10000",
    )
    assert balance(server.url, payee.address) == 10_000
    assert _post(server, "settle", body)["errorReason"] == "invalid_exact_evm_nonce_already_used"

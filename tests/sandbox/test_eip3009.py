"""Signature recovery against authorizations signed with eth-account, as clients sign them."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

from reference_server.sandbox.eip3009 import (
    Authorization,
    InvalidSignature,
    MalformedAuthorization,
    recover_signer,
    transaction_hash,
)
from reference_server.sandbox.token import SANDBOX_TOKEN

from .helpers import DOMAIN, USDC, authorization, new_account, sign

#: secp256k1's group order: ``s`` and ``n - s`` both verify; only the low one is canonical.
_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _parts() -> tuple[object, object, dict[str, str]]:
    payer, payee = new_account(), new_account()
    return payer, payee, authorization(payer, payee.address, 1_250_000)


def test_token_is_base_sepolia_usdc() -> None:
    assert SANDBOX_TOKEN.chain_id == 84532
    assert SANDBOX_TOKEN.network == "eip155:84532"
    assert SANDBOX_TOKEN.address == USDC
    assert (SANDBOX_TOKEN.name, SANDBOX_TOKEN.version, SANDBOX_TOKEN.decimals) == ("USDC", "2", 6)


def test_valid_signature_recovers_the_payer() -> None:
    payer, _, auth = _parts()
    signed = sign(payer, auth)
    assert recover_signer(Authorization.from_json(auth), signed.signature) == payer.address


def test_lowercase_addresses_and_nonce_recover_the_same_signer() -> None:
    payer, _, auth = _parts()
    signed = sign(payer, auth)
    shouted = {**auth, "from": auth["from"].lower(), "to": auth["to"].lower()}
    shouted["nonce"] = "0x" + auth["nonce"][2:].upper()
    parsed = Authorization.from_json(shouted)
    assert parsed == Authorization.from_json(auth)
    assert recover_signer(parsed, signed.signature) == payer.address


def test_a_signature_by_someone_else_recovers_someone_else() -> None:
    payer, _, auth = _parts()
    thief = new_account()
    signed = sign(thief, auth)  # claims to be from payer, signed by thief
    signer = recover_signer(Authorization.from_json(auth), signed.signature)
    assert signer == thief.address != payer.address


def test_tampered_value_no_longer_recovers_the_payer() -> None:
    payer, _, auth = _parts()
    signed = sign(payer, auth)
    tampered = Authorization.from_json({**auth, "value": "999999999"})
    assert recover_signer(tampered, signed.signature) != payer.address


@pytest.mark.parametrize("field", ["to", "validAfter", "validBefore", "nonce"])
def test_any_tampered_field_breaks_the_signature(field: str) -> None:
    payer, _, auth = _parts()
    signed = sign(payer, auth)
    other = {
        "to": new_account().address,
        "validAfter": "1",
        "validBefore": str(int(auth["validBefore"]) + 1),
        "nonce": "0x" + "ab" * 32,
    }[field]
    assert recover_signer(Authorization.from_json({**auth, field: other}), signed.signature) != (
        payer.address
    )


@pytest.mark.parametrize(
    "domain",
    [
        {**DOMAIN, "chainId": 8453},  # Base mainnet
        {**DOMAIN, "chainId": 1},
        {**DOMAIN, "name": "USD Coin"},  # Base mainnet USDC's name
        {**DOMAIN, "version": "1"},
        {**DOMAIN, "verifyingContract": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"},
    ],
    ids=["base-mainnet", "ethereum", "name", "version", "other-token"],
)
def test_signed_for_another_chain_or_domain_does_not_recover_the_payer(
    domain: dict[str, object],
) -> None:
    payer, _, auth = _parts()
    signed = sign(payer, auth, domain)
    assert recover_signer(Authorization.from_json(auth), signed.signature) != payer.address
    # ... while the server, told the same domain, would recover it: only the domain differs.
    other = attrs.evolve(
        SANDBOX_TOKEN,
        chain_id=domain["chainId"],
        name=domain["name"],
        version=domain["version"],
        address=domain["verifyingContract"],
    )
    assert recover_signer(Authorization.from_json(auth), signed.signature, other) == payer.address


def test_high_s_twin_of_a_valid_signature_is_refused() -> None:
    payer, _, auth = _parts()
    raw = bytes.fromhex(sign(payer, auth).signature[2:])
    s, v = int.from_bytes(raw[32:64], "big"), raw[64]
    twin = raw[:32] + (_N - s).to_bytes(32, "big") + bytes([55 - v])  # 27 <-> 28
    with pytest.raises(InvalidSignature, match="low-s"):
        recover_signer(Authorization.from_json(auth), "0x" + twin.hex())


@pytest.mark.parametrize(
    "mangle",
    [
        lambda sig: sig[:-2] + "00",  # v = 0
        lambda sig: sig[:-2] + "1d",  # v = 29
        lambda sig: sig[:-2],  # 64 bytes
        lambda sig: sig + "00",  # 66 bytes (a wrapped smart-wallet signature, say)
        lambda sig: sig[2:],  # no 0x
        lambda sig: "0x" + "zz" * 65,
        lambda sig: None,
        lambda sig: 12345,
    ],
)
def test_malformed_signatures_are_refused(mangle: object) -> None:
    payer, _, auth = _parts()
    signature = mangle(sign(payer, auth).signature)  # type: ignore[operator]
    with pytest.raises(InvalidSignature):
        recover_signer(Authorization.from_json(auth), signature)


def test_zero_r_is_refused() -> None:
    payer, _, auth = _parts()
    sig = sign(payer, auth).signature
    with pytest.raises(InvalidSignature):
        recover_signer(Authorization.from_json(auth), "0x" + "00" * 32 + sig[66:])


@pytest.mark.parametrize(
    "change",
    [
        {"from": "0x1234"},
        {"to": None},
        {"to": "0x" + "0" * 40},
        {"value": "-1"},
        {"value": "1.5"},
        {"value": 1.5},
        {"value": True},
        {"value": str(2**256)},
        {"validBefore": ""},
        {"nonce": "0x1234"},
        {"nonce": 7},
    ],
)
def test_malformed_authorizations_are_refused(change: dict[str, object]) -> None:
    _, _, auth = _parts()
    with pytest.raises(MalformedAuthorization):
        Authorization.from_json({**auth, **change})


def test_integers_may_be_json_numbers() -> None:
    _, _, auth = _parts()
    parsed = Authorization.from_json({**auth, "value": 1_250_000, "validAfter": 0})
    assert parsed == Authorization.from_json(auth)


def test_transaction_hash_is_deterministic_per_authorization() -> None:
    _, _, auth = _parts()
    parsed = Authorization.from_json(auth)
    tx = transaction_hash(parsed)
    assert tx.startswith("0x") and len(tx) == 66
    assert tx == transaction_hash(Authorization.from_json(dict(auth)))
    assert tx != transaction_hash(Authorization.from_json({**auth, "value": "1"}))
    other_chain = attrs.evolve(SANDBOX_TOKEN, chain_id=8453)
    assert tx != transaction_hash(parsed, other_chain)


def test_recovering_a_signature_leaves_the_recursion_limit_alone() -> None:
    """eth-account's import raises the recursion limit (py_ecc); the server must not run
    with it, or a deeply nested JSON body crashes it instead of being answered 400."""
    script = (
        "import json, sys\n"
        "from reference_server.sandbox.eip3009 import *\n"
        "limit = sys.getrecursionlimit()\n"
        "auth = Authorization.from_json({'from': '0x' + '1' * 40, 'to': '0x' + '2' * 40,"
        " 'value': '1', 'validAfter': '0', 'validBefore': '9', 'nonce': '0x' + '3' * 64})\n"
        "try:\n"
        "    recover_signer(auth, '0x' + '11' * 64 + '1b')\n"
        "except InvalidSignature:\n"
        "    pass\n"
        "assert sys.getrecursionlimit() == limit, sys.getrecursionlimit()\n"
        "try:\n"
        "    json.loads('[' * 200000 + ']' * 200000)\n"
        "except RecursionError:\n"
        "    print('refused')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "refused", done.stderr[-2000:]

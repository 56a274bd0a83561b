"""The committed artefacts are what the committed sources compile to (the devchain
deploys the artefacts, so an edit to a ``.vy`` alone would silently not ship)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reference_server.devchain import artefact, build


def test_the_build_check_passes_on_the_committed_artefact(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert build.main(["--check"]) == 0, capsys.readouterr().out


def test_the_build_check_fails_when_the_artefact_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = artefact.load("permit2")
    stale["bytecode_runtime"] = stale["bytecode_runtime"][:-2] + "00"
    copy = tmp_path / "permit2.json"
    copy.write_text(json.dumps(stale))
    committed = artefact.path
    monkeypatch.setattr(
        artefact, "path", lambda name: copy if name == "permit2" else committed(name)
    )

    assert build.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "out of date" in out and "permit2.vy" in out and "token.vy" not in out
    assert json.loads(copy.read_text()) == stale  # --check never writes


def test_the_token_has_six_decimals_eip3009_and_permit() -> None:
    functions = _functions("token")
    # The 65-byte (v, r, s) form: selector 0xe3ee160e, which x402's facilitator calls.
    assert functions["transferWithAuthorization"] == [
        *("address", "address", "uint256", "uint256", "uint256", "bytes32"),
        *("uint8", "bytes32", "bytes32"),
    ]
    assert functions["permit"] == [
        *("address", "address", "uint256", "uint256", "uint8", "bytes32", "bytes32")
    ]
    assert {"authorizationState", "decimals", "balanceOf", "mint", "DOMAIN_SEPARATOR"} <= set(
        functions
    )


def _functions(name: str) -> dict[str, list[str]]:
    return {
        entry["name"]: [i["type"] for i in entry["inputs"]]
        for entry in artefact.load(name)["abi"]
        if entry["type"] == "function"
    }


def test_permit2_and_the_upto_proxy_have_the_abi_x402_calls() -> None:
    """The selectors x402's facilitator and the proxy call, from x402's own ABI."""
    from eth_utils import function_abi_to_4byte_selector
    from x402.mechanisms.evm.constants import X402_UPTO_PERMIT2_PROXY_ABI

    (official,) = X402_UPTO_PERMIT2_PROXY_ABI
    (ours,) = [e for e in artefact.load("upto_proxy")["abi"] if e.get("name") == "settle"]
    assert function_abi_to_4byte_selector(ours) == function_abi_to_4byte_selector(official)
    permit2 = _functions("permit2")
    assert {"DOMAIN_SEPARATOR", "nonceBitmap", "invalidateUnorderedNonces"} <= set(permit2)
    assert permit2["permitWitnessTransferFrom"] == [
        *("tuple", "tuple", "address", "bytes32", "string", "bytes")
    ]
    # Permit2's own selector for permitWitnessTransferFrom(permit, details, owner, ...).
    (witness_transfer,) = [
        e for e in artefact.load("permit2")["abi"] if e.get("name") == "permitWitnessTransferFrom"
    ]
    assert function_abi_to_4byte_selector(witness_transfer).hex() == "137c29fe"

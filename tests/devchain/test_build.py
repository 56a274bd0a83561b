"""The committed token artefact is what the committed source compiles to (the devchain
deploys the artefact, so an edit to ``token.vy`` alone would silently not ship)."""

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
    stale = artefact.load()
    stale["bytecode"] = stale["bytecode"][:-2] + "00"
    copy = tmp_path / "token.json"
    copy.write_text(json.dumps(stale))
    monkeypatch.setattr(build, "ARTEFACT", copy)

    assert build.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert json.loads(copy.read_text()) == stale  # --check never writes


def test_the_token_has_six_decimals_eip3009_and_permit() -> None:
    functions = {
        entry["name"]: [i["type"] for i in entry["inputs"]]
        for entry in artefact.load()["abi"]
        if entry["type"] == "function"
    }
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

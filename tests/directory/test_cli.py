"""``svc resources create --listed --method --body-hint``, ``svc update-resource`` and
``svc directory`` against a live server."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from svc.cli import _build

from ..support import Account, LiveServer
from .helpers import DEMO_SELLER


def run(*args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(_build(), list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_listing_a_post_resource_from_the_shell(server: LiveServer, account: Account) -> None:
    seller = ["--base-url", server.url, "--seller-key", account.seller_key]
    code, out = run(
        *seller,
        "resources",
        "create",
        "--path",
        "/v1/forecast",
        "--amount",
        "0.05",
        "--description",
        "Forecast",
        "--listed",
        "--method",
        "POST",
        "--body-hint",
        '{"city": "Lisbon"}',
    )
    assert code == 0, out
    made = json.loads(out)
    assert (made["listed"], made["method"], made["body_hint"]) == (True, "POST", {"city": "Lisbon"})

    anyone = ["--base-url", server.url, "--environment", "test"]
    code, out = run(*anyone, "directory", "--q", "forecast")
    assert code == 0, out
    [entry] = json.loads(out)["data"]
    assert entry["id"] == made["id"] and entry["body_hint"] == {"city": "Lisbon"}
    code, out = run(*anyone, "directory", "--all", "--kind", "http")
    assert code == 0, out
    assert [e["id"] for e in json.loads(out)["data"] if e["seller_name"] != DEMO_SELLER] == [
        made["id"]
    ]

    code, out = run(*seller, "update-resource", made["id"], "--method", "GET")
    assert code == 1 and "clear it (body_hint: null)" in out
    code, out = run(
        *seller, "update-resource", made["id"], "--method", "any", "--body-hint", "null"
    )
    assert code == 0, out
    assert (json.loads(out)["method"], json.loads(out)["body_hint"]) == (None, None)
    code, out = run(*seller, "update-resource", made["id"], "--unlisted")
    assert code == 0 and json.loads(out)["listed"] is False
    code, out = run(*anyone, "directory", "--q", "forecast")
    assert code == 0 and json.loads(out)["data"] == []

    code, out = run(*seller, "update-resource", made["id"], "--body-hint", "[1]")
    assert code == 2 and "must be a JSON object" in out
    code, out = run(*anyone, "directory", "--max-amount", "0.009")
    assert code == 0 and json.loads(out)["data"] == []

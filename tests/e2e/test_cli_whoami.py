"""``svc whoami`` against a real server, and a wrong key named as the key it is."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from svc.cli import _build

from ..support import Account, LiveServer

#: A clean slate: none of the caller's own SVC_* variables leak into a run.
_UNSET: dict[str, str | None] = {
    name: None
    for name in (
        "SVC_BASE_URL",
        "SVC_OWNER_JWT",
        "SVC_SELLER_KEY",
        "SVC_WALLET_KEY",
        "SVC_ENVIRONMENT",
    )
}


def svc(*args: str, **env: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``svc ARGS`` with exactly ``env``'s SVC_* variables."""
    result = CliRunner().invoke(_build(), list(args), env={**_UNSET, **env})
    return result.exit_code, result.stdout, result.stderr


def whoami(*args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = svc(*args, "whoami", **env)
    return code, json.loads(out), err


def test_whoami_names_each_credential_its_role_environment_and_base_url(
    server: LiveServer, account: Account
) -> None:
    code, report, err = whoami(
        "--owner-jwt",
        account.owner_jwt,
        "--environment",
        "test",
        SVC_BASE_URL=server.url,
        SVC_SELLER_KEY=account.seller_key,
        SVC_WALLET_KEY=account.wallet_key,
    )
    assert code == 0, err
    assert report["base_url"] == server.url and report["base_url_from"] == "SVC_BASE_URL"
    owner, seller, wallet = report["credentials"]
    assert owner["credential"] == "owner JWT" and owner["from"] == "--owner-jwt"
    assert owner["role"] == "owner" and owner["owner_id"] == account.owner_id
    assert owner["environment"] == "test" and owner["environment_from"] == "--environment"
    assert owner["expires_at"] > "2026"
    assert seller == {
        "credential": "seller key",
        "from": "SVC_SELLER_KEY",
        "role": "seller",
        "seller_id": account.seller_id,
        "name": "shop",
        "environment": "test",
    }
    assert wallet["credential"] == "wallet key" and wallet["from"] == "SVC_WALLET_KEY"
    assert wallet["role"] == "wallet" and wallet["wallet_key_id"] == account.wallet_key_id
    assert wallet["environment"] == "test" and wallet["status"] == "active"
    assert "environment: test (--environment)" in err


def test_whoami_says_an_owner_jwt_acts_in_live_by_default(
    server: LiveServer, account: Account
) -> None:
    code, report, err = whoami("--base-url", server.url, SVC_OWNER_JWT=account.owner_jwt)
    assert code == 0, err
    assert report["base_url_from"] == "--base-url"
    [owner] = report["credentials"]
    assert owner["from"] == "SVC_OWNER_JWT" and owner["environment"] == "live"
    assert owner["environment_from"] == "the default"
    assert "environment: live (the default; pass --environment test" in err


def test_whoami_names_the_wrong_key_the_user_gave(server: LiveServer, account: Account) -> None:
    """``--seller-key hello``: the seller key given is refused, and nothing says owner JWT."""
    code, report, err = whoami(
        "--base-url", server.url, "--seller-key", "hello", SVC_WALLET_KEY=account.wallet_key
    )
    assert code == 1
    seller, wallet = report["credentials"]
    assert seller["credential"] == "seller key" and seller["from"] == "--seller-key"
    assert seller["refused"].startswith("401 invalid_credential: This route needs a seller key")
    assert wallet["role"] == "wallet" and "refused" not in wallet  # the good one still checked
    assert "the seller key given by --seller-key was refused" in err
    assert "owner JWT" not in err + json.dumps(report)


def test_whoami_without_a_credential_says_which_to_give(server: LiveServer) -> None:
    code, report, err = whoami("--base-url", server.url)
    assert code == 1 and report["credentials"] == []
    assert "--owner-jwt, --seller-key or --wallet-key" in err and "SVC_SELLER_KEY" in err


def test_a_wrong_key_is_named_as_the_key_it_was_given_as(server: LiveServer) -> None:
    """Any seller or wallet command with a key that is not one: the error is about that key
    (it used to say "The owner JWT is malformed")."""
    for args, credential in (
        (("--seller-key", "hello", "balance"), "seller key"),
        (("--seller-key", "hello", "resources", "list"), "seller key"),
        (("--wallet-key", "hello", "attempts"), "wallet key"),
        (("--seller-key", "svc_sk_nope", "balance"), "seller key is malformed"),
        (("--wallet-key", "svc_vw_live", "attempts"), "wallet key is malformed"),
    ):
        code, _, err = svc("--base-url", server.url, *args)
        assert code == 1, err
        assert "401 invalid_credential" in err and credential in err, (args, err)
        assert "owner JWT" not in err, (args, err)


def test_a_missing_credential_is_named_as_the_command_takes_it(server: LiveServer) -> None:
    """A command whose credential was not given says which option or variable gives it,
    not the SDK's constructor argument, and nothing is sent."""
    for args, wanted in (
        (("--seller-key", "hello", "sellers", "list"), "an owner JWT: pass --owner-jwt or set "),
        (("--owner-jwt", "x", "balance"), "a seller key: pass --seller-key or set SVC_SELLER_KEY"),
        (("attempts",), "a wallet key: pass --wallet-key or set SVC_WALLET_KEY"),
    ):
        code, _, err = svc("--base-url", server.url, *args)
        assert code == 1 and f"error: this command needs {wanted}" in err, (args, err)
        assert "=..." not in err and "RequestOptions" not in err, err

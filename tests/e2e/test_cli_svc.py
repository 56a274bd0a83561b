"""The ``svc`` command against a real server: the seller go-live flow from the shell."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from click.testing import CliRunner

from svc.cli import _build

from ..money.helpers import market
from ..payouts.helpers import FAST_PAYOUTS, complete_onboarding, shop
from ..support import Account, LiveServer, new_account

#: 0.0001 a token, at most 0.50: 137 tokens cost 0.0137.
METERED = {"pricing": "metered", "unit_price": "0.0001", "unit": "token", "max_amount": "0.50"}


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    """Exit code, and stdout (the JSON result) on success or all the output on failure:
    owner commands name their environment on stderr."""
    result = CliRunner().invoke(_build(), list(args), catch_exceptions=False, env=env)
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def run_split(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout (the JSON result) and stderr (progress and errors) apart."""
    result = CliRunner().invoke(_build(), list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_seller_flow_from_the_shell(server: LiveServer, account: Account) -> None:
    seller = ["--base-url", server.url, "--seller-key", account.seller_key]
    code, out = run(
        *seller,
        "create-pay-link",
        "--path",
        "/v1/report",
        "--amount",
        "0.05",
        "--sku-kind",
        "credit_topup",
        "--credits",
        "10",
    )
    assert code == 0, out
    link = json.loads(out)
    assert link["gate_url"].startswith(server.url + "/g/")
    assert link["pay_url"].startswith(server.url + "/buy/")
    # pay_url everywhere; pay_page_url beside it because the spec's tool table names it so
    assert set(link) == {"resource_id", "gate_url", "pay_url", "pay_page_url"}
    assert link["pay_page_url"] == link["pay_url"]
    code, out = run(*seller, "update-resource", link["resource_id"], "--amount", "0.07")
    assert code == 0 and json.loads(out)["amount"] == "0.07"
    code, out = run(*seller, "enable-payments")
    assert code == 0 and json.loads(out)["x402_enabled"] is True
    code, out = run(*seller, "resources", "list")
    [listed] = json.loads(out)["data"]
    assert listed["metadata"]["credits"] == 10

    owner = ["--base-url", server.url, "--owner-jwt", account.owner_jwt, "--environment", "test"]
    code, out = run(
        *owner, "webhooks", "create", "http://localhost:9/hooks", "--event", "payment.succeeded"
    )
    assert code == 0, out
    hook = json.loads(out)
    assert hook["signing_secret"].startswith("whsec_") and hook["events"] == ["payment.succeeded"]
    code, out = run(*owner, "webhooks", "delete", hook["id"])
    assert code == 0 and json.loads(out)["status"] == "deleted"


def test_errors_print_code_and_request_id(server: LiveServer) -> None:
    code, out = run("--base-url", server.url, "--seller-key", "svc_sk_test_nope", "balance")
    assert code == 1
    assert "401 invalid_credential" in out and "request_id=req_" in out
    code, out = run("--base-url", server.url, "balance")
    assert code == 1 and "SVC_SELLER_KEY" in out  # no key at all: said before sending


def test_owner_and_agent_flow_from_the_shell(server: LiveServer, account: Account) -> None:
    """Mint and fund a wallet key with a policy, pay with it, list its pay-url attempts,
    then recycle the seller's takings: all from the shell."""
    owner = ["--base-url", server.url, "--owner-jwt", account.owner_jwt, "--environment", "test"]
    code, out = run(
        *owner,
        "wallet-keys",
        "create",
        "--name",
        "cli agent",
        "--allowance",
        "1.00",
        "--period",
        "day",
        "--allowed-rail",
        "rill",
        "--allowed-host",
        "api.example.com",
    )
    assert code == 0, out
    key = json.loads(out)
    assert key["key"].startswith("svc_vw_test_")
    assert key["policy"]["allowed_rails"] == ["rill"]
    assert key["policy"]["allowed_hosts"] == ["api.example.com"]
    code, out = run(*owner, "wallet-keys", "fund", key["id"], "0.50")
    assert code == 0 and json.loads(out)["balance"] == "0.50", out

    seller = ["--base-url", server.url, "--seller-key", account.seller_key]
    code, out = run(*seller, "create-pay-link", "--path", "/r", "--amount", "0.20")
    resource_id = json.loads(out)["resource_id"]
    agent = ["--base-url", server.url, "--wallet-key", key["key"]]
    code, out = run(*agent, "pay", resource_id)
    assert code == 0 and json.loads(out)["amount"] == "0.20", out
    code, out = run(*agent, "attempts")
    assert code == 0 and json.loads(out)["data"] == [], out

    code, out = run(*owner, "recycle", account.seller_id)
    assert code == 0, out
    assert json.loads(out)["amount"] == "0.198"  # 0.20 less the 1% fee
    code, out = run(*owner, "wallet-keys", "revoke", key["id"])
    assert code == 0 and json.loads(out)["status"] == "revoked", out
    code, out = run(*owner, "wallet-keys", "list")
    listed = {k["id"]: k["status"] for k in json.loads(out)["data"]}
    assert listed == {account.wallet_key_id: "active", key["id"]: "revoked"}


def test_lists_page_from_the_shell(server: LiveServer, account: Account) -> None:
    """``--limit``/``--starting-after`` give one page; ``--all`` follows the pages; the
    delivery log of an endpoint is a list like the others."""
    owner = ["--base-url", server.url, "--owner-jwt", account.owner_jwt, "--environment", "test"]
    for name in ("b", "c"):
        assert run(*owner, "sellers", "create", "--name", name)[0] == 0
    code, out = run(*owner, "sellers", "list", "--limit", "2")
    first = json.loads(out)
    assert code == 0 and len(first["data"]) == 2 and first["has_more"] is True
    last = first["data"][-1]["id"]
    code, out = run(*owner, "sellers", "list", "--limit", "2", "--starting-after", last)
    rest = json.loads(out)
    assert [s["name"] for s in rest["data"]] == ["c"] and rest["has_more"] is False
    code, out = run(*owner, "sellers", "list", "--all", "--limit", "1")
    assert [s["name"] for s in json.loads(out)["data"]] == ["shop", "b", "c"]
    code, out = run(*owner, "sellers", "list", "--starting-after", "sel_nope")
    assert code == 1 and "validation_error" in out

    code, out = run(*owner, "webhooks", "create", server.url + "/nowhere")
    hook = json.loads(out)["id"]
    for _ in range(3):
        assert run(*owner, "webhooks", "test", hook)[0] == 0
    code, out = run(*owner, "webhooks", "deliveries", hook, "--all", "--limit", "2")
    assert code == 0 and len(json.loads(out)["data"]) == 3


def test_payouts_from_the_shell(make_server: Callable[..., LiveServer]) -> None:
    """``svc connect`` hands the onboarding link to a person (here the sandbox form,
    posted as a browser would), ``svc withdraw --wait`` shows the payout move until it is
    paid, and a failing bank account makes it exit 1 with the money back."""
    fast = make_server(**FAST_PAYOUTS)
    s = shop(fast)
    seller = ["--base-url", fast.url, "--seller-key", s.acct.seller_key]
    code, out, _ = run_split(*seller, "connect", "status")
    assert code == 0 and json.loads(out)["status"] == "not_started"
    code, out, err = run_split(*seller, "withdraw")
    assert code == 1 and "payouts_not_enabled" in err and "GET /sellers/me/balance" in err

    code, out, err = run_split(
        *seller, "connect", "onboard", "--country", "US", "--type", "express"
    )
    assert code == 0, err
    link = json.loads(out)
    assert "a person must" in err and "svc connect sync" in err
    assert complete_onboarding(link["onboard_url"]).status_code == 200
    code, out, _ = run_split(*seller, "connect", "sync")
    assert code == 0 and json.loads(out)["payouts_enabled"] is True
    code, out, _ = run_split(*seller, "connect", "login")
    assert code == 0 and json.loads(out)["login_url"].startswith(fast.url)

    code, out, err = run_split(
        *seller, "withdraw", "--amount", "5.00", "--wait", "--interval", "0.05"
    )
    assert code == 0, err
    done = json.loads(out)
    assert (done["status"], done["amount"]) == ("paid", "5.00")
    progress = [line.rsplit(": ", 1)[-1] for line in err.splitlines()]
    assert progress[0] == "pending" and progress[-1] == "paid", err
    assert f"withdrawal {done['id']} of 5.00 USD: pending" in err
    code, out, _ = run_split(*seller, "withdraw", "--amount", "1.00")  # no --wait: at once
    assert code == 0 and json.loads(out)["status"] == "pending"
    code, out, _ = run_split(*seller, "withdrawals", "--all", "--limit", "1")
    listed = json.loads(out)["data"]
    assert len(listed) == 2 and listed[1]["id"] == done["id"]
    code, out, _ = run_split(*seller, "withdrawals", done["id"])
    assert json.loads(out)["status"] == "paid"

    owner = ["--base-url", fast.url, "--owner-jwt", s.acct.owner_jwt, "--environment", "test"]
    code, out, _ = run_split(*owner, "connect", "status", "--seller-id", s.acct.seller_id)
    assert code == 0 and json.loads(out)["payouts_enabled"] is True

    failing = shop(fast)
    seller = ["--base-url", fast.url, "--seller-key", failing.acct.seller_key]
    link = json.loads(run_split(*seller, "connect", "onboard", "--country", "US")[1])
    assert complete_onboarding(link["onboard_url"], bank="fails").status_code == 200
    assert run_split(*seller, "connect", "sync")[0] == 0
    code, out, err = run_split(*seller, "withdraw", "--wait", "--interval", "0.05")
    assert code == 1
    assert json.loads(out)["status"] == "failed"
    assert "failed" in err and "back in the balance" in err
    assert failing.balance() == Decimal("9.90")


def test_owner_commands_say_their_environment_and_a_404_names_it(server: LiveServer) -> None:
    """Owner commands default to live, as the service does for an owner JWT: each one says
    on stderr which environment it used and why, and a 404 names it with the way out."""
    acct = new_account(server.url)  # its wallet key is a test one
    owner = ["--base-url", server.url, "--owner-jwt", acct.owner_jwt]
    code, out, err = run_split(*owner, "wallet-keys", "fund", acct.wallet_key_id, "1.00")
    assert code == 1 and out == ""
    assert "environment: live (the default; pass --environment test" in err
    assert (
        "no such wallet key in live; pass --environment test or set SVC_ENVIRONMENT=test" in err
    ), err
    code, out, err = run_split(*owner, "webhooks", "create", "http://localhost:9/h")
    assert code == 0 and json.loads(out)["environment"] == "live", out
    assert err.startswith("environment: live (the default"), err

    code, out, err = run_split(
        *owner, "--environment", "test", "wallet-keys", "fund", acct.wallet_key_id, "1.00"
    )
    assert code == 0 and json.loads(out)["balance"] == "1.00", out + err
    assert err == "environment: test (--environment)\n"
    result = CliRunner().invoke(
        _build(), [*owner, "wallet-keys", "list"], env={"SVC_ENVIRONMENT": "test"}
    )
    assert result.exit_code == 0 and result.stderr == "environment: test (SVC_ENVIRONMENT)\n"
    assert [k["id"] for k in json.loads(result.stdout)["data"]] == [acct.wallet_key_id]
    # seller-key and wallet-key commands carry their environment in the key: no line
    code, out, err = run_split("--base-url", server.url, "--seller-key", acct.seller_key, "balance")
    assert code == 0 and err == ""


def test_owners_sign_up_over_http(server: LiveServer) -> None:
    """``svc owners create`` signs up through ``POST /owners`` (no database at hand): the
    JWT it prints works at once; ``--jwt-only`` prints it alone for ``$(...)``."""
    code, out, err = run_split("--base-url", server.url, "owners", "create", "--email", "a@x.io")
    assert code == 0, err
    created = json.loads(out)
    assert created["owner_id"].startswith("own_")
    owner = ["--base-url", server.url, "--owner-jwt", created["owner_jwt"], "--environment", "test"]
    code, out, _ = run_split(*owner, "sellers", "create", "--name", "mine")
    assert code == 0 and json.loads(out)["seller_key"].startswith("svc_sk_test_")
    code, out, err = run_split(
        "--base-url", server.url, "owners", "create", "--email", "b@x.io", "--jwt-only"
    )
    assert code == 0 and out.count(".") == 2 and not out.startswith("{"), out
    code, out, err = run_split("--base-url", server.url, "owners", "create", "--email", "a@x.io")
    assert code == 1 and "409 email_taken" in err, err


def test_a_metered_receipt_read_and_captured_from_the_shell(server: LiveServer) -> None:
    """The payer reads its held receipt, the seller captures the units used, and both read
    the settled outcome; capture wants the seller key."""
    m = market(server)
    agent = ["--base-url", server.url, "--wallet-key", m.wallet_key]
    seller = ["--base-url", server.url, "--seller-key", m.seller_key]
    metered_options = [f"--{k.replace('_', '-')}={v}" for k, v in METERED.items()]
    code, out = run(*seller, "resources", "create", "--path", "/v1/chat", *metered_options)
    assert code == 0, out
    metered = json.loads(out)
    assert (metered["pricing"], metered["unit"], metered["amount"]) == ("metered", "token", "0.50")
    code, out = run(*seller, "update-resource", metered["id"], "--unit-price", "0.0001")
    assert code == 0 and json.loads(out)["unit_price"] == "0.0001", out
    paid = m.agent.pay(resource_id=metered["id"])
    code, out = run(*agent, "receipts", "get", paid.receipt_id)
    assert code == 0, out
    assert (json.loads(out)["status"], json.loads(out)["amount"]) == ("authorized", "0.50")
    code, out = run(*agent, "receipts", "capture", paid.receipt_id, "--units", "137")
    assert code == 1 and "SVC_SELLER_KEY" in out  # a seller action
    code, out = run(*seller, "receipts", "capture", paid.receipt_id, "--units", "137")
    assert code == 0, out
    captured = json.loads(out)
    assert (captured["status"], captured["amount"], captured["units"]) == ("settled", "0.0137", 137)
    code, out = run(*seller, "receipts", "get", paid.receipt_id)
    read = json.loads(out)
    assert code == 0 and (read["status"], read["units"]) == ("settled", 137)
    code, out = run(*seller, "receipts", "capture", paid.receipt_id, "--units", "1")
    assert code == 1 and "409" in out and "request_id=req_" in out


def test_a_payment_refunded_and_its_state_read_from_the_shell(server: LiveServer) -> None:
    """The seller refunds part of a payment, lists and reads its refunds; payer and seller
    read the payment's state; refunding is the seller's, and never past the payment."""
    m = market(server)
    agent = ["--base-url", server.url, "--wallet-key", m.wallet_key]
    seller = ["--base-url", server.url, "--seller-key", m.seller_key]
    paid = m.agent.pay(resource_id=m.resource.id)
    code, out = run(*agent, "refunds", "create", paid.receipt_id)
    assert code == 1 and "SVC_SELLER_KEY" in out  # a seller action
    code, out = run(
        *seller, "refunds", "create", paid.receipt_id, "--amount", "0.25", "--reason", "late"
    )
    assert code == 0, out
    made = json.loads(out)
    assert (made["amount"], made["status"], made["reason"]) == ("0.25", "succeeded", "late")
    code, out = run(*seller, "refunds", "list")
    assert code == 0 and [r["id"] for r in json.loads(out)["data"]] == [made["id"]], out
    code, out = run(*seller, "refunds", "get", made["id"])
    assert code == 0 and json.loads(out)["receipt_id"] == paid.receipt_id, out
    for who in (agent, seller):
        code, out = run(*who, "payments", "get", paid.receipt_id)
        state = json.loads(out)
        assert code == 0 and (state["state"], state["remaining"]) == ("refunded", "0.75"), out
    code, out = run(*seller, "refunds", "create", paid.receipt_id, "--amount", "0.80")
    assert code == 1 and "409 refund_exceeds_payment" in out, out

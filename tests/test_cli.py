"""The ``svc-server`` commands, run as a user runs them (subprocesses, real database)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from .support import LiveServer, free_port, run_python


def svc_server(
    *args: str, database_url: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SVC_DATABASE_URL": database_url}
    return run_python("-m", "reference_server", *args, env=env, cwd=cwd, timeout=timeout)


def test_owners_create_prints_a_jwt_the_server_accepts(database_url: str, make_server: Any) -> None:
    live: LiveServer = make_server()  # the server's database, as the operator's is
    done = svc_server(
        "owners", "create", "--email", "Op@Example.com", "--json", database_url=database_url
    )
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    assert created["owner_id"].startswith("own_")
    r = httpx.post(
        live.url + "/sellers",
        headers={"Authorization": f"Bearer {created['owner_jwt']}", "X-Svc-Environment": "test"},
    )
    assert r.status_code == 201, r.text
    # the same email again: the same owner, a fresh JWT (plain output is the JWT alone)
    again = svc_server("owners", "create", "--email", "op@example.com", database_url=database_url)
    assert again.returncode == 0
    token = again.stdout.strip()
    listed = httpx.get(
        live.url + "/sellers",
        headers={"Authorization": f"Bearer {token}", "X-Svc-Environment": "test"},
    ).json()
    assert [s["id"] for s in listed["data"]] == [r.json()["id"]]


def test_every_command_that_opens_a_database_names_it(database_url: str, tmp_path: Path) -> None:
    """A relative SQLite URL is the current folder's: stderr names the file by its
    absolute path, so an owner created in the wrong folder is seen to be."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (("migrate",), ("owners", "create", "--email", "o@x.io")):
        done = svc_server(*args, database_url="sqlite:///svc.db", cwd=elsewhere)
        assert done.returncode == 0, done.stderr
    assert f"database: sqlite:///{elsewhere / 'svc.db'}" in done.stderr.splitlines()
    assert done.stdout.count(".") == 2  # stdout is still the JWT alone
    for args in (("migrate",), ("ledger", "audit")):
        done = svc_server(*args, database_url=database_url)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("database: "), done.stderr
    hidden = svc_server("migrate", database_url="postgresql://u:hunter2@127.0.0.1:9/x", timeout=30)
    assert "database: postgresql://u:***@127.0.0.1:9/x" in hidden.stderr
    assert "hunter2" not in hidden.stderr


def test_a_database_no_server_has_run_on_is_refused(database_url: str, tmp_path: Path) -> None:
    """``owners create`` (and ``ledger audit``) on a missing SQLite file or a database
    without the schema: exit 1 naming it and what to do, and no ./svc.db made."""
    folder = tmp_path / "not-the-servers"
    folder.mkdir()
    for url in ("sqlite:///svc.db", database_url):  # a missing file, then an empty database
        for args in (("owners", "create", "--email", "o@x.io"), ("ledger", "audit")):
            done = svc_server(*args, database_url=url, cwd=folder)
            assert done.returncode == 1, done.stdout + done.stderr
            assert done.stdout == "" and "Traceback" not in done.stderr
            said = " ".join(done.stderr.split())
            assert "no database at" in said or "has no svc tables" in said, said
            assert "no server" in said and "--database-url or SVC_DATABASE_URL" in said
            assert "svc-server migrate" in said
            assert list(folder.iterdir()) == []  # no empty ./svc.db left behind
    assert svc_server("migrate", database_url=database_url).returncode == 0
    made = svc_server("owners", "create", "--email", "o@x.io", database_url=database_url)
    assert made.returncode == 0 and made.stdout.count(".") == 2, made.stderr


def test_run_says_what_it_serves_and_stops_cleanly_on_ctrl_c(database_url: str) -> None:
    """The lines a newcomer reads first name the URL, the environment, the database and
    the workers; Ctrl-C (SIGINT) stops it gracefully with exit status 0, no "Aborted!"."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "run", "--port", str(port)],
        env={**os.environ, "SVC_DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        time.sleep(0.5)  # the "serving" line follows the server's start on its own thread
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "Aborted!" not in out + err and "Traceback" not in out + err, out + err
    lines = err.splitlines()
    url = f"http://127.0.0.1:{port}"
    assert f"serving: {url} (gate_url and pay_url on {url}); Ctrl-C to stop" in lines, err
    assert any(line.startswith("environment: development") for line in lines), err
    assert any(line.startswith("database: ") for line in lines), err
    assert any(line.startswith("workers: ") and "SVC_WORKER_ENABLED" in line for line in lines)
    assert lines[-1] == "svc-server stopped", err


def test_run_with_demo_walks_the_go_live_flow(database_url: str, make_server: Any) -> None:
    port = free_port()
    done = svc_server(
        "run", "--port", str(port), "--exit-after-demo", database_url=database_url, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for step in (
        "1. owner created",
        "2. seller created in test",
        "3. resource",
        f"gate_url (agents pay): http://127.0.0.1:{port}/g/",
        "4. payments enabled: mpp=True x402=True",
        "5. webhook we_",
        "6. test wallet key svc_vw_test_",
        "7. agent's pay-url paid the gate_url 0.05 on x402 (sandbox tx 0x",
        "the gate answered 200 with receipt rcpt_",
        "8. agent paid again on the ledger rail (POST /pay): receipt rcpt_",
        "0.90 of today's allowance left",
        "9. seller verified both receipts (valid=True); balance 0.099 USD",
        "webhook payment.succeeded (x402, processor_deposit) received and verified",
        "webhook payment.succeeded (rill, ledger) received and verified",
        "+10 report credits",
        f"12. payouts: onboarding link for a person to complete in a browser: "
        f"http://127.0.0.1:{port}/sandbox/connect/onboard/",
        "13. the demo fills the sandbox onboarding form itself; in real use a human does",
        "14. connect synced: payouts_enabled: true, requirements_due: []",
        "15. withdrew the whole balance, 0.099 USD: withdrawal wd_",
        "pending -> in_transit -> paid; the money is out, seller balance 0.00 USD",
    ):
        assert step in out, out
    assert out.index("11. webhook") < out.index("12. payouts") < out.index("16. withdrawal wd_")
    assert "webhook we_" in out and "deleted (its receiver stops with the demo)" in out
    # The credentials it made, whole, as a reader copies them, said to be test ones.
    assert "TEST credentials (test environment only" in out
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in out.splitlines()
        if line.startswith("export SVC_")
    )
    assert exported["SVC_ENVIRONMENT"] == "test"
    assert exported["SVC_BASE_URL"] == f"http://127.0.0.1:{port}"
    assert exported["SVC_SELLER_KEY"].startswith("svc_sk_test_")
    assert exported["SVC_WALLET_KEY"].startswith("svc_vw_test_")
    assert f"key {exported['SVC_SELLER_KEY']} (shown once)" in out
    assert f"6. test wallet key {exported['SVC_WALLET_KEY']} minted" in out
    # ... and a reader carries on from them: each one works, and no webhook endpoint the
    # demo made is left active (its receiver is gone).
    live: LiveServer = make_server()
    test = {"X-Svc-Environment": "test"}
    owner = {**test, "Authorization": f"Bearer {exported['SVC_OWNER_JWT']}"}
    hooks = httpx.get(live.url + "/webhooks", headers=owner)
    assert hooks.status_code == 200, hooks.text
    assert [h for h in hooks.json()["data"] if h["status"] != "deleted"] == []
    seller = {"Authorization": f"Bearer {exported['SVC_SELLER_KEY']}"}
    assert httpx.get(live.url + "/sellers/me/balance", headers=seller).status_code == 200
    agent = {"Authorization": f"Bearer {exported['SVC_WALLET_KEY']}"}
    spent = httpx.get(live.url + "/spend/balance", headers=agent)
    assert spent.status_code == 200 and spent.json()["balance"] == "0.90", spent.text


def test_migrate_is_idempotent(database_url: str) -> None:
    for _ in range(2):
        done = svc_server("migrate", database_url=database_url)
        assert done.returncode == 0, done.stderr
        assert "up to date" in done.stdout


def test_receipt_keys_rotate_publishes_the_new_key_at_once(
    database_url: str, make_server: Any
) -> None:
    """Rotated from the command line, the running server publishes the new key beside
    the old ones (which stay until their tokens expire)."""
    live: LiveServer = make_server()

    def kids() -> set[str]:
        return {k["kid"] for k in httpx.get(live.url + "/.well-known/jwks.json").json()["keys"]}

    before = kids()
    done = svc_server("receipt-keys", "rotate", "--environment", "test", database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert kids() == before | {done.stdout.strip()} and len(before) == 2


def test_ledger_audit_reports_a_sound_and_a_broken_ledger(
    database_url: str, make_server: Any
) -> None:
    from sqlalchemy import update

    from reference_server.store import tables as t

    live: LiveServer = make_server()

    def shift(micros: int) -> None:
        balance = t.ledger_accounts.c.balance_micros
        with live.ctx.db.write() as conn:
            conn.execute(update(t.ledger_accounts).values(balance_micros=balance + micros))

    done = svc_server("ledger", "audit", database_url=database_url)
    assert done.returncode == 0 and "ledger is sound" in done.stdout
    shift(+1)  # money appears from nowhere
    broken = svc_server("ledger", "audit", database_url=database_url)
    assert broken.returncode == 1 and "PROBLEM" in broken.stdout
    shift(-1)  # put it back for the fixture's own audit


#: The server extra's packages, as a core-only install lacks them (``None`` in
#: ``sys.modules`` makes their import raise ModuleNotFoundError, as if not installed).
_SERVER_ONLY = (
    "click",
    "pydantic_settings",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "limits",
    "redis",
    "jwt",
    "jinja2",
    "eth_utils",
    "eth_account",
    "x402",
    "mpp",
)


def test_svc_server_without_the_server_extra_says_how_to_install_it() -> None:
    """On a core-only install ``svc-server --help`` (the console script's import and call)
    prints the install hint and exits 1, without a traceback."""
    script = (
        "import sys\n"
        f"for name in {_SERVER_ONLY!r}: sys.modules[name] = None\n"
        "from reference_server.cli import main\n"
        "main()\n"
    )
    done = run_python("-c", script, "--help")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "svc-server needs the server extra" in done.stderr
    assert "pip install 'svc-payments[server]'" in done.stderr


def test_importing_the_server_package_imports_no_server_dependency() -> None:
    """What lets the entry point above import at all (its names load on first use)."""
    script = (
        f"import sys, reference_server\nprint([n for n in {_SERVER_ONLY!r} if n in sys.modules])\n"
    )
    done = run_python("-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_an_amount_the_sdk_refuses_is_a_usage_error_not_a_traceback() -> None:
    """Refused before anything is sent: click's usage error names the option, exit 2."""
    env = {
        **os.environ,
        "SVC_SELLER_KEY": "svc_sk_test_" + "x" * 32,
        "SVC_BASE_URL": "http://127.0.0.1:9",
    }
    for args in (
        ["resources", "create", "--path", "/x", "--amount", "cheap"],
        ["directory", "--max-amount", "cheap"],
    ):
        done = run_python("-c", "from svc.cli import main; main()", *args, env=env)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "decimal string" in done.stderr

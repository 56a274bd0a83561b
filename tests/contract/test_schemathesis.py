"""The OpenAPI document holds: schemathesis fuzzes every operation of a live server on
loopback, with an owner, a seller and a wallet credential, and every answer must be no
server error, of a declared status, of the declared content type and match its declared
schema (issue 11 item 3).  The document itself must load without schema errors.

The server runs in this process (real uvicorn on 127.0.0.1, on the test's database:
SQLite, or PostgreSQL when ``SVC_TEST_DATABASE_URL`` is set); schemathesis runs as the
``st`` CLI (``python -m schemathesis.cli``) in a subprocess, so its exit code is the verdict.

**No network beyond loopback.**  Fuzzed bodies carry URLs (a webhook's ``url``, a
resource's ``upstream_url``, ``pay-url``'s ``url``) which the server fetches or delivers
to (gate proxying, pay-url, the outbox worker's webhook deliveries).  Every such request
goes through :mod:`reference_server.outbound`, which resolves names with
``Settings.outbound_resolver``: here a resolver that refuses every name, so no DNS query
ever leaves the machine and no name reaches an address.  An IP literal
(``http://93.184.216.34/``) is not resolved, and outside production the policy allows
any address but link-local ones, so a second guard refuses the rest: an audit hook
(:func:`sys.addaudithook`) on ``socket.connect`` and ``socket.getaddrinfo`` that, while this
test runs, raises for any connection to an address other than loopback or a Unix socket
and for any lookup of a name other than ``localhost``.  It sees every connection the
process opens (the outbox worker's threads, the event loop's sockets, anything a future
code path might add), not only the ones made through the outbound policy, so a public
address cannot be reached whatever a fuzzed body says.  (Sockets opened in C, such as
libpq's to the PostgreSQL leg's database on loopback, are not Python's and not seen; no
outbound path uses one.)  The worker stays on (its deliveries are part of what is
exercised) and can only reach loopback.

A failing run's message starts with the operations that failed, one a line, then
schemathesis's own report (each failure with its check, the answer and a curl line).
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from starlette.responses import Response

import svc

from ..support import LiveApp, LiveServer, new_account

#: The checks issue 11 item 3 names.  Schemathesis's others (negative_data_rejection,
#: positive_data_acceptance, ...) judge rules the document cannot state (a path for an
#: MCP resource, an unknown ``starting_after``), so they would fail on correct answers.
CHECKS = (
    "not_a_server_error",
    "response_schema_conformance",
    "status_code_conformance",
    "content_type_conformance",
)

#: Test cases per operation and phase: the run takes 15 to 40 s (SQLite, PostgreSQL);
#: ``SVC_SCHEMATHESIS_ARGS="-n 200 --seed 3"`` fuzzes harder by hand.
MAX_EXAMPLES = 15

#: How often a path parameter is a seeded identifier rather than a generated string.
SEEDED_IDS = 0.8


# -- no network beyond loopback ------------------------------------------------------------

_guard = threading.Event()  # set while a fuzzed server runs
_hook_installed = False


def _refuse_outside_loopback(event: str, args: tuple[Any, ...]) -> None:
    if not _guard.is_set():
        return
    if event == "socket.getaddrinfo":
        host = args[0]
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if host is None or host == "localhost" or _is_loopback(str(host)):
            return
        raise OSError(f"schemathesis test: no name lookups beyond loopback ({host!r})")
    if event == "socket.connect":
        address = args[1]
        if not isinstance(address, tuple):  # a Unix socket path
            return
        if not _is_loopback(str(address[0])):
            raise OSError(f"schemathesis test: no connections beyond loopback ({address!r})")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.partition("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def loopback_only() -> Iterator[None]:
    """Arm the audit hook for this test.  Audit hooks cannot be removed, so it is
    installed once per process and does nothing while disarmed."""
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_refuse_outside_loopback)
        _hook_installed = True
    _guard.set()
    try:
        yield
    finally:
        _guard.clear()


def refuse_every_name(host: str, port: int) -> list[str]:
    """``Settings.outbound_resolver``: no name resolves (the outbound layer reports a
    refused resolution as a failed request, as it would a name that does not exist)."""
    raise OSError(f"{host}: names are not resolved in the schemathesis test")


# -- the run -------------------------------------------------------------------------------


@attrs.frozen
class Seed:
    """What schemathesis authenticates with (one bearer token per security scheme) and
    the identifiers of things that exist, offered for path parameters so that fuzzing
    reaches past ``404 not_found`` into each handler."""

    tokens: dict[str, str]
    ids: dict[str, str]


def _seed(live: LiveServer, receiver: str) -> Seed:
    """An owner in test with a seller taking open-rail payments, two resources, a funded
    wallet key it authenticates with and a second one to be fuzzed (revoking it leaves
    the first working), a handle, a webhook to ``receiver`` (on loopback) with one
    delivery, and a sandbox transfer."""
    account = new_account(live.url)
    owner = svc.Client(
        base_url=live.url, owner_jwt=account.owner_jwt, environment="test", max_retries=0
    )
    owner.wallet_keys.fund(account.wallet_key_id, "5.00")
    other_key = owner.wallet_keys.create(name="fuzzed")
    owner.wallet_keys.fund(other_key.id, "1.00")
    seller = svc.Client(base_url=live.url, seller_key=account.seller_key, max_retries=0)
    seller.sellers.enable_payments()  # x402 and MPP: the gate rails reach their engines
    resource = seller.resources.create(kind="http", path="/v1/report", amount="0.10")
    seller.resources.create(kind="mcp", tool="summarise", amount="0.25")
    handle = owner.handles.create("fuzz-" + secrets.token_hex(3))
    webhook = owner.webhooks.create(receiver)
    as_owner = {"Authorization": f"Bearer {account.owner_jwt}", "X-Svc-Environment": "test"}
    with httpx.Client(base_url=live.url, headers=as_owner) as http:
        http.post(f"/webhooks/{webhook.id}/test").raise_for_status()
        deliveries = http.get(f"/webhooks/{webhook.id}/deliveries").raise_for_status()
        address = "0x" + secrets.token_hex(20)
        minted = http.post("/sandbox/faucet", json={"address": address, "amount": "1.00"})
    return Seed(
        tokens={
            "owner": account.owner_jwt,
            "seller": account.seller_key,
            "wallet": account.wallet_key,
        },
        ids={
            "resource_id": resource.id,
            "short_id": resource.short_id,
            "seller_id": account.seller_id,
            "key_id": other_key.id,
            "webhook_id": webhook.id,
            "delivery_id": deliveries.json()["data"][0]["id"],
            "destination": handle.handle,
            "address": address,
            "tx_hash": minted.raise_for_status().json()["transaction"],
        },
    )


def _config(seed: Seed) -> str:
    """schemathesis.toml: one bearer token per security scheme of the document (they are
    named after the roles), every request in the test environment, a 502 not counted
    as a server error, and each path
    parameter drawn from the seeded identifiers most of the time (fuzzed otherwise)."""
    lines = ["[headers]", '"X-Svc-Environment" = "test"', ""]
    # 502 (upstream_unavailable, upstream_too_large) is the answer for a third party that
    # failed, and here every upstream outside loopback fails: no name resolves.  Any
    # other 5xx is the server's own failure.
    lines += ["[checks.not_a_server_error]", 'expected-statuses = ["2xx", "3xx", "4xx", "502"]', ""]
    for scheme, token in seed.tokens.items():
        lines += [f"[auth.openapi.{scheme}]", f'bearer = "{token}"', ""]
    for name, value in seed.ids.items():
        lines += [f"[dictionaries.{name}]", f'values = ["{value}"]', ""]
    lines.append("[parameters]")
    lines += [
        f'"path.{name}" = {{ dictionary = "{name}", probability = {SEEDED_IDS} }}'
        for name in seed.ids
    ]
    return "\n".join(lines) + "\n"


def run_schemathesis(
    live: LiveServer, seed: Seed, workdir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    config = workdir / "schemathesis.toml"
    config.write_text(_config(seed))
    command = [
        sys.executable,  # the `st` CLI of this environment, whatever PATH says
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{live.url}/agent-openapi.json",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(MAX_EXAMPLES),
        "--phases",
        "examples,coverage,fuzzing",
        # One worker: a run with four once stopped an operation on an error inside
        # hypothesis ("AST constructor recursion depth mismatch", from its lambda-source
        # lookup, which is not thread-safe on CPython 3.11); one is fast enough.
        "--workers",
        "1",
        "--seed",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "20",
        "--report-dir",
        str(workdir / "report"),
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEMATHESIS_")}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=240, env=env, cwd=workdir
    )


async def _receiver(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Where the seeded webhook delivers (on loopback): takes anything, answers 204."""
    if scope["type"] == "http":
        await Response(status_code=204)(scope, receive, send)


def test_every_operation_conforms_to_the_document(
    make_server: Callable[..., LiveServer],
    serve_app: Callable[..., LiveApp],
    loopback_only: None,
    tmp_path: Path,
) -> None:
    """``SVC_SCHEMATHESIS_ARGS`` adds options to the run, e.g. ``--include-path-regex
    ^/resources`` to look at some routes, or ``-n 200 --seed 3`` to fuzz harder."""
    live = make_server(outbound_resolver=refuse_every_name)
    receiver = serve_app(_receiver, lifespan="off")
    seed = _seed(live, receiver.url + "/hooks")
    extra = os.environ.get("SVC_SCHEMATHESIS_ARGS", "").split()
    result = run_schemathesis(live, seed, tmp_path, *extra)
    assert result.returncode == 0, (
        f"schemathesis exited {result.returncode}; failing operations:\n"
        + "".join(f"  {op}\n" for op in failing_operations(result.stdout))
        + f"\n{result.stdout}\n{result.stderr}"
    )


def failing_operations(report: str) -> list[str]:
    """``GET /demo/echo`` for each ``____ GET /demo/echo ____`` heading of the report's
    FAILURES and ERRORS sections."""
    return [m.group(1) for m in re.finditer(r"^_{3,} ([A-Z]+ /\S*) _{3,}$", report, re.M)]


def test_the_guard_refuses_connections_beyond_loopback(loopback_only: None) -> None:
    """The audit hook above is what keeps fuzzed URLs off the network: it must refuse a
    public address and a name, and let loopback through."""
    with pytest.raises(OSError, match="beyond loopback"):
        socket.create_connection(("93.184.216.34", 80), timeout=1)
    with pytest.raises(OSError, match="beyond loopback"):
        socket.getaddrinfo("example.com", 80)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        socket.create_connection(listener.getsockname(), timeout=1).close()

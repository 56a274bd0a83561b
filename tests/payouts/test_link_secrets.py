"""A one-time link's token is a secret: the database keeps its SHA-256 only, and the
access log of a real ``svc-server run`` process shows the route's template, never the
token -- whatever the request made of the link (the page, its form, a trailing-slash
redirect, a refusal at the input boundary, the ``/api`` twin, a used link)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from sqlalchemy import select

from reference_server.app import served
from reference_server.store import Database
from reference_server.store import tables as t

from ..support import free_port, new_account
from .helpers import complete_onboarding

ONBOARD = "/sandbox/connect/onboard/{token}"
LOGIN = "/sandbox/connect/login/{token}"


@attrs.frozen
class _Process:
    url: str
    log: Path


@pytest.fixture
def process(database_url: str, tmp_path: Path) -> Iterator[_Process]:
    """``python -m reference_server run`` with its access log (stdout) and errors in a file."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    env = {
        **os.environ,
        "SVC_DATABASE_URL": database_url,
        "SVC_RATE_LIMIT": "100000/second",
        "SVC_SIGNUP_RATE_LIMIT": "100000/second",
        "SVC_PUBLIC_URL": url,
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reference_server", "run", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(proc, url, log)
        yield _Process(url=url, log=log)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text())
        try:
            if httpx.get(url + "/ready", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server process did not become ready: " + log.read_text())


def _links(url: str) -> tuple[str, str]:
    """An onboarding link used end to end, and a login link opened; their tokens."""
    acct = new_account(url)
    seller = {"Authorization": f"Bearer {acct.seller_key}"}
    r = httpx.post(url + "/sellers/me/connect/onboard", json={"country": "US"}, headers=seller)
    assert r.status_code == 200, r.text
    onboard_url = str(r.json()["onboard_url"])
    token = onboard_url.rsplit("/", 1)[1]
    assert httpx.get(onboard_url).status_code == 200
    assert httpx.get(onboard_url + "/?next=1").status_code == 307  # the slash redirect
    assert httpx.get(url + "/api" + ONBOARD.format(token=token)).status_code == 200
    assert httpx.get(onboard_url + "%00").status_code == 400  # the input boundary's
    stale = httpx.post(onboard_url, data={"legal_name": "Ada", "csrf": "0"})
    assert stale.status_code == 403, stale.text
    assert complete_onboarding(onboard_url).status_code == 200
    assert httpx.get(onboard_url).status_code == 404  # used
    assert httpx.post(url + "/sellers/me/connect/sync", headers=seller).status_code == 200
    r = httpx.post(url + "/sellers/me/connect/login", headers=seller)
    assert r.status_code == 200, r.text
    login_url = str(r.json()["login_url"])
    assert httpx.get(login_url).status_code == 200
    return token, login_url.rsplit("/", 1)[1]


def _database(database_url: str) -> dict[str, list[Any]]:
    db = Database(database_url)
    try:
        with db.read() as conn:
            return {
                table.name: [tuple(row) for row in conn.execute(select(table))]
                for table in t.metadata.sorted_tables
            }
    finally:
        db.dispose()


def test_link_tokens_stay_out_of_the_database_and_the_access_log(
    process: _Process, database_url: str
) -> None:
    tokens = _links(process.url)
    time.sleep(0.2)  # the last access log line written

    log = process.log.read_text()
    assert f'"GET {ONBOARD} HTTP/1.1" 200' in log, log
    assert f'"POST {ONBOARD} HTTP/1.1" 403' in log, log
    assert f'"GET /api{ONBOARD} HTTP/1.1" 200' in log, log
    assert f'"GET {LOGIN} HTTP/1.1" 200' in log, log
    assert '"POST /sellers/me/connect/onboard HTTP/1.1" 200' in log, log  # others as sent
    for token in tokens:
        assert token not in log, log

    rows = _database(database_url)
    stored = {row[0] for row in rows["sandbox_account_links"]}
    assert stored == {hashlib.sha256(token.encode()).hexdigest() for token in tokens}
    for name, table in rows.items():
        for row in table:
            for token in tokens:
                assert token not in repr(row), (name, row)


def test_every_path_token_is_declared_secret() -> None:
    """A route whose path carries a token is a one-time link: its path is a secret."""
    tokens = [ep for ep in served() if "{token}" in ep.path]
    assert tokens and all((ep.page is not None and ep.page.secret_path) for ep in tokens)

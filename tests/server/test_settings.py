"""Settings: every field is read from ``SVC_<NAME>`` and documented; bad configurations
stop every command with one line naming the variable; production starts only with its
keys supplied from outside the database."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from reference_server import Settings
from reference_server.settings import SettingsError, env_fields, env_variable
from reference_server.store import Database
from reference_server.store import tables as t

from ..support import PRODUCTION_KEYS, free_port, run_python, server_processes

pytestmark = pytest.mark.timeout(120)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"
KEYS_ENV = {env_variable(name): value for name, value in PRODUCTION_KEYS.items()}

#: A valid, non-default value for each string setting (a new one must be added here).
STRING_EXAMPLES: dict[str, str] = {
    "database_url": "postgresql://svc@db.internal/svc",
    "env": "production",
    "public_url": "https://pay.example.com",
    "jwt_secret": "s" * 40,
    "metrics_token": "m" * 32,
    "log_format": "json",
    "data_key": Fernet.generate_key().decode(),
    "rate_limit": "7/minute",
    "signup_rate_limit": "3/hour",
    "rate_limit_storage": "redis://127.0.0.1:6379",
    "live_facilitator_url": "https://x402.example.com/facilitator",
    "live_rpc_url": "https://sepolia.base.org",
    "live_asset_address": "0x" + "1" * 40,
    "live_asset_name": "Other Coin",
    "live_asset_version": "3",
    "live_deposit_address": "0x" + "2" * 40,
    "live_upto_facilitator_address": "0x" + "3" * 40,
    "live_hot_wallet_key": "0x" + "ab" * 32,
    "stripe_secret_key": "sk_test_" + "k" * 24,
    "stripe_webhook_secret": "whsec_" + "w" * 32,
    "stripe_api_base": "https://stripe.internal.example.com",
    "processor": "stripe",
}
#: What the other settings must say for a non-default one to be taken.
NEEDS: dict[str, dict[str, str]] = {
    "env": KEYS_ENV,  # production needs its keys
    "processor": {
        env_variable(name): STRING_EXAMPLES[name]
        for name in ("stripe_secret_key", "stripe_webhook_secret")
    },
}


def example(name: str) -> tuple[str, Any]:
    """(what the environment says, what Settings must hold), never the default."""
    field = Settings.model_fields[name]
    kind, default = field.annotation, field.default
    if kind in (bool, bool | None):
        return ("false", False) if default else ("true", True)
    if kind is int:
        return str(default + 1), default + 1
    if kind is float:
        return str(default / 2), default / 2
    if kind == tuple[float, ...]:
        return "1, 2.5", (1.0, 2.5)
    if kind == tuple[str, ...]:
        if name == "data_previous_keys":
            keys = (Fernet.generate_key().decode(), Fernet.generate_key().decode())
        else:
            keys = ("old-secret-1", "old-secret-2")
        return ",".join(keys), keys
    value = STRING_EXAMPLES[name]
    return value, value


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in os.environ:
        if name.startswith("SVC_"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("field", env_fields())
def test_every_setting_is_read_from_its_variable(
    field: str, clean_environment: pytest.MonkeyPatch
) -> None:
    raw, expected = example(field)
    for name, value in NEEDS.get(field, {}).items():
        clean_environment.setenv(name, value)
    clean_environment.setenv(env_variable(field), raw)
    assert getattr(Settings.from_env(), field) == expected


def test_every_setting_is_documented_and_nothing_else() -> None:
    table = DOCS.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(SVC_[A-Z0-9_]+)` \|", table, flags=re.MULTILINE))
    assert documented == {env_variable(name) for name in env_fields()}


def test_code_built_settings_obey_the_same_rules() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings(env="production")
    assert refused.value.variable == "SVC_JWT_SECRET"
    with pytest.raises(SettingsError, match="SVC_DATA_KEY"):
        Settings(env="production", jwt_secret=PRODUCTION_KEYS["jwt_secret"])
    with pytest.raises(SettingsError, match="SVC_ENV"):
        Settings(env="prod")
    production = Settings(env="production", **PRODUCTION_KEYS)
    assert production.production and not production.signup_open
    with pytest.raises(SettingsError, match="SVC_PUBLIC_URL: must be an https"):
        production.evolve(public_url="http://pay.example.com")
    with pytest.raises(SettingsError, match="SVC_RATE_LIMIT"):
        Settings(rate_limit="lots")


def test_secrets_stay_out_of_repr_and_messages(clean_environment: pytest.MonkeyPatch) -> None:
    settings = Settings(**PRODUCTION_KEYS)
    assert all(value not in repr(settings) for value in PRODUCTION_KEYS.values())
    clean_environment.setenv("SVC_DATA_KEY", "not-a-key-hunter2")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert "hunter2" not in str(refused.value)


# -- the commands, as an operator runs them ------------------------------------------

LAUNCHERS = {
    "python -m reference_server": ["-m", "reference_server"],
    # What the svc-server console script runs.
    "svc-server": ["-c", "from reference_server.cli import main; main()"],
}


def run_command(
    args: list[str], env: dict[str, str], directory: Path
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    database = f"sqlite:///{directory / 'svc.db'}"
    return run_python(*args, env={**base, "SVC_DATABASE_URL": database, **env}, cwd=directory)


def assert_refused(result: subprocess.CompletedProcess[str], variable: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SVC_ENV": "prod"}, "SVC_ENV"),
        ({"SVC_ENV": "Production"}, "SVC_ENV"),
        ({"SVC_MAX_BODY_BYTES": "abc"}, "SVC_MAX_BODY_BYTES"),
        ({"SVC_RATE_LIMIT": "a lot"}, "SVC_RATE_LIMIT"),
        ({"SVC_PUBLIC_URL": "pay.example.com"}, "SVC_PUBLIC_URL"),
        ({"SVC_HEADER_TIMEOUT_SECONDS": "-1"}, "SVC_HEADER_TIMEOUT_SECONDS"),
        ({"SVC_ENV": "production"}, "SVC_JWT_SECRET"),
        ({"SVC_ENV": "production", "SVC_JWT_SECRET": "x" * 40}, "SVC_DATA_KEY"),
        ({"SVC_ENV": "production", **KEYS_ENV, "SVC_JWT_SECRET": "short"}, "SVC_JWT_SECRET"),
        (
            {"SVC_ENV": "production", **KEYS_ENV, "SVC_PUBLIC_URL": "http://pay.example.com"},
            "SVC_PUBLIC_URL",
        ),
    ],
    ids=lambda v: "-".join(f"{k}={x[:12]}" for k, x in v.items()) if isinstance(v, dict) else v,
)
def test_run_refuses_to_start(
    launcher: str, env: dict[str, str], variable: str, tmp_path: Path
) -> None:
    args = [*LAUNCHERS[launcher], "run", "--port", str(free_port())]
    assert_refused(run_command(args, env, tmp_path), variable)
    assert not (tmp_path / "svc.db").exists()  # refused before touching anything


@pytest.mark.parametrize(
    "command", [["worker"], ["migrate"], ["owners", "create", "--email", "a@example.com"]]
)
def test_every_command_refuses_a_bad_configuration(command: list[str], tmp_path: Path) -> None:
    args = [*LAUNCHERS["python -m reference_server"], *command]
    assert_refused(run_command(args, {"SVC_ENV": "production"}, tmp_path), "SVC_JWT_SECRET")


def test_production_with_its_keys_starts_and_keeps_them_out_of_the_database(
    database_url: str,
) -> None:
    env = {"SVC_ENV": "production", **KEYS_ENV, "SVC_PUBLIC_URL": "https://pay.example.com"}
    with server_processes(database_url, 1, env=env) as [url]:
        assert httpx.get(url + "/ready").status_code == 200
        refused = httpx.post(url + "/owners", json={"email": "someone@example.com"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "signup_disabled"
    db = Database(database_url)
    with db.read() as conn:
        stored = set(conn.execute(select(t.server_secrets.c.name)).scalars())
    db.dispose()
    assert not stored & {"owner_jwt", "data_key"}

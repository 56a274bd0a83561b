"""``svc`` and ``svc-server`` explain themselves: every command and option has help, and an
option read from an ``SVC_*`` variable names it.  Generated from the click command trees,
so a command or option added later is checked too."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

import svc
from reference_server import Settings
from reference_server.commands import main as svc_server
from reference_server.settings import env_variable
from svc.cli import _build

from .support import run_python

#: The Settings fields: an option named after one is read as that ``SVC_*`` variable too.
SETTINGS_FIELDS = set(Settings.model_fields)


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


COMMANDS = [*_walk(_build(), ("svc",)), *_walk(svc_server, ("svc-server",))]
OPTIONS = [
    pytest.param(command, option, id=f"{path} {option.opts[0]}")
    for path, command in COMMANDS
    for option in command.params
    if isinstance(option, click.Option)
]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _ in COMMANDS])
def test_every_command_has_help(path: str, command: click.Command) -> None:
    assert (command.help or "").strip(), f"{path} has no help"


@pytest.mark.parametrize(("command", "option"), OPTIONS)
def test_every_option_has_help_naming_its_variable(
    command: click.Command, option: click.Option
) -> None:
    record = option.get_help_record(click.Context(command))
    assert record is not None and (option.help or "").strip(), f"{option.opts} has no help"
    envvars = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or ())
    if option.name in SETTINGS_FIELDS:
        envvars.append(env_variable(option.name))
    for variable in envvars:
        assert variable.startswith("SVC_") and variable in record[1], (option.opts, record)


def test_svc_version_names_the_version_and_the_distribution() -> None:
    done = run_python("-m", "svc.cli", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"svc {svc.__version__} (svc-payments)"


def test_svc_help_says_the_environment_default() -> None:
    """Owner commands act in live unless told: ``--help`` says so where it lists the option."""
    done = run_python("-m", "svc.cli", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    environment = text[text.index("--environment") :]
    assert "default live" in environment.split("--", 2)[1]
    assert "env var: SVC_ENVIRONMENT" in environment

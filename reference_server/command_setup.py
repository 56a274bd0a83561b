"""What every ``svc-server`` command does first: read the settings (a bad one is one line,
never a traceback), say which database it opens, and refuse a database no server has run
on.  Shared by :mod:`.commands` and :mod:`.reconcile_command`."""

from __future__ import annotations

import logging
import os

import click

from . import telemetry
from .settings import Settings, SettingsError

__all__ = ["command_settings", "database_line", "require_server_database", "say"]

_log = logging.getLogger("svc-server")


def command_settings(*, server_database: bool = False, **overrides: object) -> Settings:
    """Settings from the environment; a bad one stops the command with one line naming
    the variable (exit status 1), never a traceback.  Says on stderr which database the
    command opens (stdout stays its output); ``server_database`` refuses one no server
    has run on (:func:`require_server_database`)."""
    try:
        settings = Settings.from_env(**overrides)
    except SettingsError as exc:
        raise click.ClickException(f"invalid configuration: {exc}") from None
    telemetry.configure_logging(settings.log_format)
    say(settings, database_line(settings.database_url))
    if server_database:
        require_server_database(settings)
    return settings


def say(settings: Settings, line: str) -> None:
    """A line for whoever runs the command, on stderr: as it is, or, with
    ``SVC_LOG_FORMAT=json``, a log record like every other line there."""
    if settings.log_format == "json":
        _log.info(line)
    else:
        click.echo(line, err=True)


def database_line(url: str) -> str:
    """``database: sqlite:////abs/path/svc.db``: which database a command opened, a file
    named by its absolute path (a relative one is the current folder's, wherever that
    is), a server's password hidden."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parsed = parsed.set(database=os.path.abspath(parsed.database or ""))
    return f"database: {parsed.render_as_string(hide_password=True)}"


#: How to point a command at the server's database, for the refusals below.
NAME_THE_SERVERS = (
    "pass the running server's database with --database-url or SVC_DATABASE_URL "
    "(svc-server run names it on its first line), or create this one with svc-server migrate"
)


def require_server_database(settings: Settings) -> None:
    """Refuse a database no server has run on: a missing SQLite file (opening it would
    make an empty ./svc.db) or one without the schema.  An owner written there would hold
    a JWT no running server accepts, which is how a command run from the wrong folder,
    or without the server's SVC_DATABASE_URL, used to fail silently."""
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    from .store import Database

    where = database_line(settings.database_url).removeprefix("database: ")
    url = make_url(settings.database_url)
    a_file = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    if a_file and not os.path.exists(url.database or ""):
        raise click.ClickException(
            f"there is no database at {where}, so no server runs on it: {NAME_THE_SERVERS}"
        )
    db = Database(settings.database_url)
    try:
        with db.engine.connect() as conn:
            migrated = inspect(conn).has_table("alembic_version")
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise click.ClickException(f"cannot open the database at {where}: {reason}") from None
    finally:
        db.dispose()
    if not migrated:
        raise click.ClickException(
            f"the database at {where} has no svc tables, so no server has run on it: "
            f"{NAME_THE_SERVERS}"
        )

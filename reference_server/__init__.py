"""reference_server: the hosted svc service, built from the modules users import.

from reference_server import Settings, create_app
app = create_app(Settings(database_url="sqlite:///svc.db"))

The names are imported on first use, so that ``svc-server`` (:mod:`reference_server.cli`)
can say "pip install 'svc-payments[server]'" on an install without the server's dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .settings import Settings, SettingsError

__all__ = ["Settings", "SettingsError", "create_app"]

_WHERE = {"create_app": ".app", "Settings": ".settings", "SettingsError": ".settings"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value

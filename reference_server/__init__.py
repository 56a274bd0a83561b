"""reference_server: the hosted svc service, built from the modules users import.

from reference_server import Settings, create_app
app = create_app(Settings(database_url="sqlite:///svc.db"))
"""

from .app import create_app
from .settings import Settings, SettingsError

__all__ = ["Settings", "SettingsError", "create_app"]

"""Persistence: the database handle, the schema and its migrations."""

from .database import Database
from .migrate import upgrade

__all__ = ["Database", "upgrade"]

"""Stripe's published example objects (``objects.json``, MIT: ``STRIPE_FIXTURES_LICENSE``)
as templates: each new object is a deep copy with new ids and the fields that matter."""

from __future__ import annotations

import copy
import json
import secrets
import time
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["API_VERSION", "new_id", "now", "template"]

#: The API version the double's events say they were rendered with.
API_VERSION = "2025-10-29.clover"


@cache
def _objects() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((Path(__file__).parent / "objects.json").read_text())
    return loaded


def template(kind: str) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(_objects()[kind])
    return obj


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(18).replace('-', 'x').replace('_', 'y')}"


def now() -> int:
    return int(time.time())

"""Fixtures for the SDK client tests; the helpers themselves are in ``sdk_support``."""

from __future__ import annotations

import pytest
from sdk_support import SVC_ENV_VARS, Twin


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own ``SVC_*`` variables must not leak into the tests."""
    for name in SVC_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["sync", "async"])
def twin(request: pytest.FixtureRequest) -> Twin:
    return Twin(request.param)

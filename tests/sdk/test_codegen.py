"""The SDK's request specs and namespaces are generated from the route table, and current.

``svc/_endpoints.py`` (and the async namespaces, from which ``tests.unasync`` writes the
blocking ones) are written by ``python -m reference_server.sdk_codegen`` from each
``Endpoint`` and its ``sdk=Sdk(...)``; the first test fails when one was edited by hand
or the route table changed without regenerating.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from reference_server import sdk_codegen
from reference_server.app import served
from svc import _endpoints

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_sdk_files_are_current() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reference_server.sdk_codegen", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_sdk_call_is_one_route_and_one_function() -> None:
    calls = sdk_codegen.calls()
    names = [call.sdk.name for call in calls]
    assert len(names) == len(set(names)), "two routes declare the same SDK method"
    assert sorted(call.function for call in calls) == sorted(_endpoints.__all__)


def test_each_spec_names_its_route() -> None:
    """A generated spec goes to its route's method and path, with its credential."""
    for call in sdk_codegen.calls():
        ep = call.ep
        if call.sdk.owner or call.sdk.build:
            continue  # the SDK tests send these with meaningful arguments
        args = {
            p.name: "1" if p.annotation == "Amount" else "x"
            for p in call.spec_params()
            if p.default is None
        }
        spec = getattr(_endpoints, call.function)(**args)
        assert (spec.method, spec.role) == (ep.method, ep.role), call.sdk.name
        filled = re.sub(r"{\w+}", "x", ep.path)
        assert spec.path.format(**spec.path_params) == filled, call.sdk.name


def test_only_api_routes_declare_sdk_calls() -> None:
    for ep in served():
        if ep.sdk is not None:
            assert ep.contract.listed and not ep.page, f"{ep.method} {ep.path}"

"""A contributor's checkout: the tools' caches stay out of git, and the Redis tests find
Redis where ``redis-server`` listens by default."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: What running the suite and its tools leaves in the checkout.
TOOL_CACHES = (
    ".schemathesis/report.xml",  # the contract tests' schemathesis runs
    ".benchmarks/run.json",
    ".hypothesis/examples/x",
    ".pytest_cache/v/x",
    ".mypy_cache/3.11/x.json",
    ".ruff_cache/x",
    ".coverage",
    "htmlcov/index.html",
    ".ci/logs/sqlite.log",
    ".ci/devchain/node_modules/@foundry-rs/anvil/package.json",  # .ci/run installs anvil here
    "svc.db",
)


@pytest.mark.parametrize("path", TOOL_CACHES)
def test_tool_caches_are_ignored_by_git(path: str) -> None:
    git = shutil.which("git")
    assert git is not None
    done = subprocess.run(
        [git, "check-ignore", "--no-index", "-q", path], cwd=ROOT, timeout=60, check=False
    )
    assert done.returncode == 0, f"{path} is not ignored by .gitignore"


def test_redis_tests_find_redis_at_its_default_address() -> None:
    """With ``SVC_TEST_REDIS_URL`` unset, the Redis tests look at redis://127.0.0.1:6379 and
    run when it answers (CI's Redis and a developer's ``redis-server`` listen there)."""
    from .support import redis_answers, run_python

    if not redis_answers("redis://127.0.0.1:6379"):
        pytest.skip("no Redis at its default address on this machine")
    script = (
        "from tests.scale import test_multi_process as multi\n"
        "from tests.server import test_ratelimit as limits\n"
        "print(multi.REDIS_URL, limits.REDIS_URL, multi.pytestmark.args[0])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SVC_TEST_REDIS_URL"}
    done = run_python("-c", script, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["redis://127.0.0.1:6379"] * 2 + ["False"]

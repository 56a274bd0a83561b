"""A server that owns its process freezes start-up's heap; one sharing its process does not.

Each case runs in a child process: a freeze in the test process would keep everything the
suite made so far out of the collector's reach for the rest of the run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ..support import run_python

pytestmark = pytest.mark.timeout(60)

_CHILD = textwrap.dedent(
    """
    import gc, sys, threading, time
    from reference_server import Settings
    from reference_server.serving import build_server
    from tests.support import free_port

    settings = Settings(database_url="sqlite:///" + sys.argv[1], worker_enabled=False)
    server = build_server(
        settings, host="127.0.0.1", port=free_port(), own_process=sys.argv[2] == "own",
        log_level="warning",
    )
    before = gc.get_freeze_count()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    print(server.started, before, gc.get_freeze_count())
    server.should_exit = True
    thread.join(10)
    """
)


def _freeze_counts(tmp_path: Path, mode: str) -> tuple[int, int]:
    root = Path(__file__).parents[2]
    done = run_python("-c", _CHILD, str(tmp_path / f"{mode}.db"), mode, cwd=root, timeout=50)
    out = done.stdout.split()
    assert done.returncode == 0 and out[0] == "True", done.stderr
    return int(out[1]), int(out[2])


def test_a_server_owning_its_process_freezes_the_heap_after_start_up(tmp_path: Path) -> None:
    before, after = _freeze_counts(tmp_path, "own")
    assert before == 0
    # The app, its lifespan's work and the protocol SDKs: well over 10,000 objects.
    assert after > 10_000


def test_a_server_sharing_its_process_leaves_the_heap_alone(tmp_path: Path) -> None:
    assert _freeze_counts(tmp_path, "shared") == (0, 0)

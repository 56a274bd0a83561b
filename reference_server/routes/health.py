"""Liveness and readiness probes.

They take the pipeline without what needs the database (no rate limit, no credential, no
body): a probe must answer even when the database is down; ``/ready`` exists to say
exactly that.
"""

from __future__ import annotations

import anyio.to_thread

from ..web.call import AsyncHandler
from ..web.endpoint import Call, Contract, Endpoint, Flow
from ..web.errors import ApiError
from ..web.responses import Reply

__all__ = ["ENDPOINTS", "unlisted_get"]


async def health(call: Call) -> Reply:
    """Liveness: the process answers."""
    return Reply({"status": "ok"})


async def ready(call: Call) -> Reply:
    """Readiness: the database answers within 5 s (503 ``not_ready`` otherwise)."""
    try:
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(call.ctx.db.ping, abandon_on_cancel=True)
    except Exception:
        raise ApiError(
            "not_ready",
            "The database is not reachable.",
            details={"checks": {"database": "unreachable"}},
        ) from None
    return Reply({"status": "ready", "checks": {"database": "ok"}})


def unlisted_get(path: str, handler: AsyncHandler) -> Endpoint:
    """A ``GET`` beside the API, neither listed nor rate limited: a probe or a document."""
    return Endpoint(
        method="GET",
        path=path,
        handler=handler,
        run=Flow(),
        rate_limit=None,
        contract=Contract(listed=False),
    )


ENDPOINTS = [unlisted_get("/health", health), unlisted_get("/ready", ready)]

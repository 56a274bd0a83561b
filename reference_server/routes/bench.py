"""Benchmark-only routes, served when ``Settings.bench_routes`` is on (off by default).

``POST /_bench/commit`` goes through the same :class:`Endpoint` pipeline as ``POST /pay``
(rate limit, wallet-key authentication, a required Idempotency-Key, one write
transaction) and inserts exactly one row, so ``bench/pay_throughput.py`` can divide
``/pay``'s numbers by it and see what the payment logic itself costs.
"""

from __future__ import annotations

from sqlalchemy import insert

from ..api.auth import Role
from ..api.endpoint import Call, Endpoint
from ..api.responses import Reply
from ..ids import new_id
from ..store import tables as t

__all__ = ["ENDPOINTS"]


def commit(call: Call) -> Reply:
    """Insert one row in ``bench_rows`` and answer its id."""
    row_id = new_id("bench")
    call.conn.execute(insert(t.bench_rows).values(id=row_id, created_at=call.now))
    return Reply({"id": row_id})


ENDPOINTS = [
    Endpoint(
        method="POST",
        path="/_bench/commit",
        handler=commit,
        auth=Role.WALLET,
        idempotency="required",
    ),
]

"""The server ``bench/pay_throughput.py`` measures: the reference server plus its baseline.

The baseline, ``POST /_bench/commit``, takes the same :class:`Endpoint` pipeline as
``POST /pay`` (rate limit, wallet-key authentication, a required Idempotency-Key, one
write transaction) and inserts exactly one row, so ``/pay``'s numbers divided by its
numbers show what the payment logic itself costs.  It lives here, not in the service: the
production app and schema know nothing of benchmarks.  Its table is created by this
script, beside the migrated schema.

    python bench/_baseline_server.py --port 8000   # settings from SVC_* as for svc-server
"""

from __future__ import annotations

import argparse

from sqlalchemy import Column, DateTime, MetaData, String, Table, insert
from starlette.applications import Starlette

from reference_server import Settings, create_app
from reference_server.ids import new_id
from reference_server.serving import build_server
from reference_server.store import Database
from reference_server.web.auth import Role
from reference_server.web.endpoint import Call, Endpoint, routes_for
from reference_server.web.responses import Reply

BASELINE_PATH = "/_bench/commit"

_metadata = MetaData()
#: Not ``bench_rows``: that was the name of the table the production schema once held
#: (migration 0007 drops it), and this one must never meet a migration.
bench_rows = Table(
    "bench_baseline_rows",
    _metadata,
    Column("id", String(40), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


def commit(call: Call) -> Reply:
    """Insert one row in ``bench_baseline_rows`` and answer its id."""
    row_id = new_id("bench")
    call.conn.execute(insert(bench_rows).values(id=row_id, created_at=call.now))
    return Reply({"id": row_id})


BASELINE = Endpoint(
    method="POST", path=BASELINE_PATH, handler=commit, auth=Role.WALLET, idempotency="required"
)


def create_bench_app(settings: Settings) -> Starlette:
    """``create_app(settings)`` with the baseline route in front of the service's own."""
    database = Database(settings.database_url)
    _metadata.create_all(database.engine)
    database.dispose()
    app = create_app(settings)
    app.router.routes[0:0] = routes_for([BASELINE])
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    settings = Settings.from_env()
    app = create_bench_app(settings)
    build_server(
        settings, host=args.host, port=args.port, app=app, own_process=True, log_level="warning"
    ).run()


if __name__ == "__main__":
    main()

"""drop bench rows: the benchmark's baseline table leaves the production schema

The one-row-commit baseline of ``bench/pay_throughput.py`` now lives in
``bench/_baseline_server.py``, which creates a table of its own beside the schema.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 22:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("bench_rows")


def downgrade() -> None:
    op.create_table(
        "bench_rows",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_rows")),
    )

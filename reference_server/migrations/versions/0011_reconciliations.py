"""reconciliations: each run of the books against the chain

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 00:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reconciliations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("from_block", sa.BigInteger(), nullable=True),
        sa.Column("to_block", sa.BigInteger(), nullable=True),
        sa.Column("drift_count", sa.Integer(), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconciliations")),
    )
    op.create_index(
        op.f("ix_reconciliations_environment_created_at"),
        "reconciliations",
        ["environment", "created_at"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_reconciliations_environment_created_at"), "reconciliations")
    op.drop_table("reconciliations")

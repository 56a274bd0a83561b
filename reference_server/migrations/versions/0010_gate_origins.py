"""gate_origins: which owner's gates answer at an origin, per environment

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 16:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_origins",
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("origin", sa.String(length=300), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("seller_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["owners.id"]),
        sa.ForeignKeyConstraint(["seller_id"], ["sellers.id"]),
        sa.PrimaryKeyConstraint("environment", "origin"),
    )


def downgrade() -> None:
    op.drop_table("gate_origins")

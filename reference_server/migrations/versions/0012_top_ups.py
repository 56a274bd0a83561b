"""top_ups: owners' payments into their account wallet from their own wallet

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 00:45:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "top_ups",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rail", sa.String(length=8), nullable=False),
        sa.Column("network", sa.String(length=40), nullable=False),
        sa.Column("tx_hash", sa.String(length=80), nullable=False),
        sa.Column("payer", sa.String(length=64), nullable=True),
        sa.Column("transfer_id", sa.String(length=40), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["owners.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("environment", "tx_hash"),
        sa.UniqueConstraint("owner_id", "environment", "idempotency_key"),
    )
    op.create_index(
        "ix_top_ups_owner_id_environment_created_at",
        "top_ups",
        ["owner_id", "environment", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_top_ups_owner_id_environment_created_at", table_name="top_ups")
    op.drop_table("top_ups")

"""refunds: a seller gives back all or part of a payment (``POST /refunds``)

``receipts.refunded_micros`` is what was given back so far: every refund raises it by a
conditional ``UPDATE`` (never past ``amount_micros``), so concurrent partial refunds
cannot give back more than was paid.  ``refunds`` holds one row per refund.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 23:45:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("receipts") as batch:
        batch.add_column(
            sa.Column("refunded_micros", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.create_table(
        "refunds",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("receipt_id", sa.String(length=40), nullable=False),
        sa.Column("seller_id", sa.String(length=40), nullable=False),
        sa.Column("wallet_key_id", sa.String(length=40), nullable=True),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=True),
        sa.Column("transfer_id", sa.String(length=40), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["receipt_id"], ["receipts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_refunds_seller_id_created_at", "refunds", ["seller_id", "created_at"])
    op.create_index("ix_refunds_receipt_id", "refunds", ["receipt_id"])


def downgrade() -> None:
    op.drop_table("refunds")
    with op.batch_alter_table("receipts") as batch:
        batch.drop_column("refunded_micros")

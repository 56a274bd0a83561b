"""card_checkouts: card payments and card top-ups through the processor's Checkout; a
pending card top-up has no transfer or settlement reference yet

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27 06:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "card_checkouts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("resource_id", sa.String(length=40), nullable=True),
        sa.Column("owner_id", sa.String(length=40), nullable=True),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("receipt_id", sa.String(length=40), nullable=True),
        sa.Column("top_up_id", sa.String(length=40), nullable=True),
        sa.Column("payment_intent", sa.String(length=255), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("refunded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["resource_id"], ["resources.id"]),
        sa.ForeignKeyConstraint(["owner_id"], ["owners.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id"),
        sa.UniqueConstraint("receipt_id"),
        sa.UniqueConstraint("top_up_id"),
    )
    op.create_index("ix_card_checkouts_payment_intent", "card_checkouts", ["payment_intent"])
    with op.batch_alter_table("top_ups") as batch:
        batch.alter_column("tx_hash", existing_type=sa.String(length=80), nullable=True)
        batch.alter_column("transfer_id", existing_type=sa.String(length=40), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM top_ups WHERE transfer_id IS NULL OR tx_hash IS NULL")
    with op.batch_alter_table("top_ups") as batch:
        batch.alter_column("transfer_id", existing_type=sa.String(length=40), nullable=False)
        batch.alter_column("tx_hash", existing_type=sa.String(length=80), nullable=False)
    op.drop_index("ix_card_checkouts_payment_intent", table_name="card_checkouts")
    op.drop_table("card_checkouts")

"""card refunds: the processor's refund id on a refund (``POST /refunds`` of a card payment)

A live card refund is the processor's: its id is kept so the processor's events
(``refund.updated``, ``charge.refunded``) find the refund they confirm or fail.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 02:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("refunds") as batch:
        batch.add_column(sa.Column("processor_refund_id", sa.String(length=64), nullable=True))
    op.create_index(
        "ix_refunds_processor_refund_id", "refunds", ["processor_refund_id"], unique=True
    )


def downgrade() -> None:
    op.drop_index("ix_refunds_processor_refund_id", table_name="refunds")
    with op.batch_alter_table("refunds") as batch:
        batch.drop_column("processor_refund_id")

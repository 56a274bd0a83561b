"""chain refunds: a refund of an open-rail ``processor_deposit`` payment is sent on chain

``refunds.tx_hash`` is the transaction that sent the USDC back from the hot wallet to the
payer (``receipts.payer``, already kept: nothing to backfill); ``refunds.next_check_at``
is when the worker next sends or follows a ``pending`` one (``NULL`` once concluded, and
for ledger refunds, which conclude at once); ``failure_reason`` says why one failed.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 02:15:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("refunds") as batch:
        batch.add_column(sa.Column("tx_hash", sa.String(length=66), nullable=True))
        batch.add_column(sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("failure_reason", sa.String(length=500), nullable=True))
    op.create_index("ix_refunds_next_check_at", "refunds", ["next_check_at"])


def downgrade() -> None:
    op.drop_index("ix_refunds_next_check_at", table_name="refunds")
    with op.batch_alter_table("refunds") as batch:
        batch.drop_column("failure_reason")
        batch.drop_column("next_check_at")
        batch.drop_column("tx_hash")

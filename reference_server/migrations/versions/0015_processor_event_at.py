"""payout_accounts.processor_event_at: the order of the processor's account events

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 07:10:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("payout_accounts") as batch:
        batch.add_column(sa.Column("processor_event_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("payout_accounts") as batch:
        batch.drop_column("processor_event_at")

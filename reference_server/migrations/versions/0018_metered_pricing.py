"""resources.pricing and receipts.status/units: metered resources and their payments

A resource is ``fixed`` (every existing one) or ``metered``: ``amount_micros`` is then the
most one payment costs, and the payer is charged the units used times
``unit_price_micros`` up to it.  ``fallback_amount_micros`` is the fixed price a rail that
cannot meter offers instead.  A receipt records the units a metered payment used and the
most its payer authorised; a metered ledger payment is ``authorized`` until its gate
reports the usage (every existing receipt is ``settled``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 19:10:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resources") as batch:
        batch.add_column(sa.Column("pricing", sa.String(8), nullable=False, server_default="fixed"))
        batch.add_column(sa.Column("unit_price_micros", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("unit", sa.String(32), nullable=True))
        batch.add_column(sa.Column("fallback_amount_micros", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("receipts") as batch:
        batch.add_column(
            sa.Column("status", sa.String(16), nullable=False, server_default="settled")
        )
        batch.add_column(sa.Column("units", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("max_amount_micros", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("receipts") as batch:
        batch.drop_column("settled_at")
        batch.drop_column("max_amount_micros")
        batch.drop_column("units")
        batch.drop_column("status")
    with op.batch_alter_table("resources") as batch:
        batch.drop_column("fallback_amount_micros")
        batch.drop_column("unit")
        batch.drop_column("unit_price_micros")
        batch.drop_column("pricing")

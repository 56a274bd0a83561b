"""spend_attempts.max_amount_micros: the maximum a metered (x402 ``upto``) pay-url signed

``amount_micros`` is what the attempt reserved and, once concluded, what it spent; for an
``upto`` payment the reservation is the signed maximum and the spend is what the URL
settled, so the maximum is kept beside it (``None``: a fixed-price payment).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 22:45:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("spend_attempts") as batch:
        batch.add_column(sa.Column("max_amount_micros", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("spend_attempts") as batch:
        batch.drop_column("max_amount_micros")

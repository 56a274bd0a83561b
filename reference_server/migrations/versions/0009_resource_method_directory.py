"""resources: the method a gate sells and a body hint; an index for the directory

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 00:45:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resources", schema=None) as batch_op:
        batch_op.add_column(sa.Column("method", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("body_hint", sa.JSON(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_resources_environment_listed_created_at"),
            ["environment", "listed", "created_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("resources", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_resources_environment_listed_created_at"))
        batch_op.drop_column("body_hint")
        batch_op.drop_column("method")

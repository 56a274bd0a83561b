"""dashboard: the owner's one-time sign-in links and sessions, and the seller's payments
index the dashboard pages by

``dashboard_links`` and ``dashboard_sessions`` store only the SHA-256 of their tokens;
``receipts`` gains an index on ``(seller_id, created_at)`` for the payments page's keyset.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 03:05:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def _table(name: str, used: bool) -> None:
    columns: list[sa.schema.SchemaItem] = [
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    ]
    if used:
        columns.append(sa.Column("used_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        name,
        *columns,
        sa.ForeignKeyConstraint(
            ["owner_id"], ["owners.id"], name=op.f(f"fk_{name}_owner_id_owners")
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f(f"pk_{name}")),
    )
    op.create_index(op.f(f"ix_{name}_expires_at"), name, ["expires_at"])


def upgrade() -> None:
    _table("dashboard_links", used=True)
    _table("dashboard_sessions", used=False)
    op.create_index(
        op.f("ix_receipts_seller_id_created_at"), "receipts", ["seller_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_receipts_seller_id_created_at"), table_name="receipts")
    for name in ("dashboard_sessions", "dashboard_links"):
        op.drop_index(op.f(f"ix_{name}_expires_at"), table_name=name)
        op.drop_table(name)

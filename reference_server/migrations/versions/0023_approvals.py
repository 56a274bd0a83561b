"""approvals: a person approves a wallet key's payment over its policy's line

``wallet_keys`` gains ``approval_above_micros``, ``approval_hosts`` and
``approval_ttl_seconds``; ``approvals`` holds one row per payment waiting for (or given)
a person's decision, with its amount held on the key meanwhile.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 02:05:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("wallet_keys") as batch:
        batch.add_column(sa.Column("approval_above_micros", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("approval_hosts", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("approval_ttl_seconds", sa.Integer(), nullable=True))
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("wallet_key_id", sa.String(length=40), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("method", sa.String(length=10), nullable=True),
        sa.Column("url", sa.String(length=2048), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("resource_id", sa.String(length=40), nullable=True),
        sa.Column("route", sa.String(length=40), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("transfer_id", sa.String(length=40), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("receipt_id", sa.String(length=40), nullable=True),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["wallet_key_id"],
            ["wallet_keys.id"],
            name=op.f("fk_approvals_wallet_key_id_wallet_keys"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_approvals_token_hash")),
        sa.UniqueConstraint(
            "wallet_key_id",
            "route",
            "idempotency_key",
            name=op.f("uq_approvals_wallet_key_id_route_idempotency_key"),
        ),
    )
    op.create_index(op.f("ix_approvals_status_expires_at"), "approvals", ["status", "expires_at"])


def downgrade() -> None:
    op.drop_table("approvals")
    with op.batch_alter_table("wallet_keys") as batch:
        batch.drop_column("approval_ttl_seconds")
        batch.drop_column("approval_hosts")
        batch.drop_column("approval_above_micros")

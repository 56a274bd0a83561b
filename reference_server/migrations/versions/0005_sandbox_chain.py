"""sandbox chain

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 10:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sandbox_balances",
        sa.Column("address", sa.String(length=42), nullable=False),
        sa.Column("balance", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("address", name=op.f("pk_sandbox_balances")),
    )
    op.create_table(
        "sandbox_nonces",
        sa.Column("authorizer", sa.String(length=42), nullable=False),
        sa.Column("nonce", sa.String(length=66), nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("authorizer", "nonce", name=op.f("pk_sandbox_nonces")),
    )
    op.create_table(
        "sandbox_transactions",
        sa.Column("block_number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tx_hash", sa.String(length=66), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("from_address", sa.String(length=42), nullable=False),
        sa.Column("to_address", sa.String(length=42), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("nonce", sa.String(length=66), nullable=True),
        sa.Column("valid_after", sa.String(length=78), nullable=True),
        sa.Column("valid_before", sa.String(length=78), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("block_number", name=op.f("pk_sandbox_transactions")),
        sa.UniqueConstraint("tx_hash", name=op.f("uq_sandbox_transactions_tx_hash")),
    )
    with op.batch_alter_table("sandbox_transactions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_sandbox_transactions_from_address_block_number"),
            ["from_address", "block_number"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_sandbox_transactions_to_address_block_number"),
            ["to_address", "block_number"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("sandbox_transactions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_sandbox_transactions_to_address_block_number"))
        batch_op.drop_index(batch_op.f("ix_sandbox_transactions_from_address_block_number"))

    op.drop_table("sandbox_transactions")
    op.drop_table("sandbox_nonces")
    op.drop_table("sandbox_balances")

"""open rails: receipts carry tx hashes, rail claims, pay-url attempts

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22 02:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("receipts", schema=None) as batch_op:
        batch_op.alter_column("transfer_id", existing_type=sa.String(length=40), nullable=True)
        batch_op.add_column(sa.Column("tx_hash", sa.String(length=66), nullable=True))
        batch_op.add_column(sa.Column("payer", sa.String(length=42), nullable=True))
        batch_op.add_column(sa.Column("network", sa.String(length=32), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_receipts_environment_kind_tx_hash"), ["environment", "kind", "tx_hash"]
        )
    op.create_table(
        "rail_claims",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rail_claims")),
    )
    op.create_table(
        "spend_attempts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("owner_id", sa.String(length=40), nullable=False),
        sa.Column("wallet_key_id", sa.String(length=40), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=True),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rail", sa.String(length=8), nullable=True),
        sa.Column("amount_micros", sa.BigInteger(), nullable=True),
        sa.Column("pay_to", sa.String(length=42), nullable=True),
        sa.Column("network", sa.String(length=32), nullable=True),
        sa.Column("payer", sa.String(length=42), nullable=True),
        sa.Column("nonce", sa.String(length=66), nullable=True),
        sa.Column("transfer_id", sa.String(length=40), nullable=True),
        sa.Column("reserved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("receipt_id", sa.String(length=40), nullable=True),
        sa.Column("tx_hash", sa.String(length=66), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("error_details", sa.JSON(), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
        sa.Column("body_encoding", sa.String(length=8), nullable=True),
        sa.Column("body_truncated", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_spend_attempts")),
        sa.UniqueConstraint("payer", "nonce", name=op.f("uq_spend_attempts_payer_nonce")),
        sa.UniqueConstraint(
            "wallet_key_id",
            "idempotency_key",
            name=op.f("uq_spend_attempts_wallet_key_id_idempotency_key"),
        ),
    )
    with op.batch_alter_table("spend_attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_spend_attempts_wallet_key_id_created_at"),
            ["wallet_key_id", "created_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("spend_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_spend_attempts_wallet_key_id_created_at"))
    op.drop_table("spend_attempts")
    op.drop_table("rail_claims")
    with op.batch_alter_table("receipts", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_receipts_environment_kind_tx_hash"), type_="unique")
        batch_op.drop_column("network")
        batch_op.drop_column("payer")
        batch_op.drop_column("tx_hash")
        batch_op.alter_column("transfer_id", existing_type=sa.String(length=40), nullable=False)

"""payouts: payout accounts and withdrawals, and the sandbox payout processor's state

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 00:05:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sandbox_payout_accounts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("type", sa.String(length=10), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("legal_name", sa.String(length=200), nullable=True),
        sa.Column("bank_account", sa.String(length=16), nullable=True),
        sa.Column("tos_accepted", sa.Boolean(), nullable=False),
        sa.Column("details_submitted", sa.Boolean(), nullable=False),
        sa.Column("payouts_enabled", sa.Boolean(), nullable=False),
        sa.Column("requirements_due", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sandbox_payout_accounts")),
    )
    op.create_table(
        "sandbox_account_links",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["sandbox_payout_accounts.id"],
            name=op.f("fk_sandbox_account_links_account_id_sandbox_payout_accounts"),
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_sandbox_account_links")),
    )
    op.create_table(
        "sandbox_payouts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("reference", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("fails", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["sandbox_payout_accounts.id"],
            name=op.f("fk_sandbox_payouts_account_id_sandbox_payout_accounts"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sandbox_payouts")),
        sa.UniqueConstraint("reference", name=op.f("uq_sandbox_payouts_reference")),
    )
    op.create_table(
        "payout_accounts",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("seller_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("processor", sa.String(length=16), nullable=False),
        sa.Column("processor_account_id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=10), nullable=False),
        sa.Column("country", sa.String(length=2), nullable=False),
        sa.Column("details_submitted", sa.Boolean(), nullable=False),
        sa.Column("payouts_enabled", sa.Boolean(), nullable=False),
        sa.Column("requirements_due", sa.JSON(), nullable=False),
        sa.Column("auto_payout", sa.Boolean(), nullable=False),
        sa.Column("auto_payout_minimum_micros", sa.BigInteger(), nullable=True),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["seller_id"], ["sellers.id"], name=op.f("fk_payout_accounts_seller_id_sellers")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payout_accounts")),
        sa.UniqueConstraint("seller_id", name=op.f("uq_payout_accounts_seller_id")),
    )
    op.create_table(
        "withdrawals",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("seller_id", sa.String(length=40), nullable=False),
        sa.Column("environment", sa.String(length=8), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("automatic", sa.Boolean(), nullable=False),
        sa.Column("transfer_id", sa.String(length=40), nullable=False),
        sa.Column("processor", sa.String(length=16), nullable=False),
        sa.Column("processor_payout_id", sa.String(length=64), nullable=True),
        sa.Column("failure_reason", sa.String(length=500), nullable=True),
        sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["seller_id"], ["sellers.id"], name=op.f("fk_withdrawals_seller_id_sellers")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_withdrawals")),
    )
    with op.batch_alter_table("withdrawals", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_withdrawals_seller_id_created_at"),
            ["seller_id", "created_at"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_withdrawals_status_next_check_at"),
            ["status", "next_check_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("withdrawals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_withdrawals_status_next_check_at"))
        batch_op.drop_index(batch_op.f("ix_withdrawals_seller_id_created_at"))

    op.drop_table("withdrawals")
    op.drop_table("payout_accounts")
    op.drop_table("sandbox_payouts")
    op.drop_table("sandbox_account_links")
    op.drop_table("sandbox_payout_accounts")

"""spend_attempts.idempotency_record_id: pay-url's keys in the one idempotency store

An attempt named its ``Idempotency-Key`` itself (``spend_attempts.idempotency_key``,
unique per wallet key); now it references the key's record in ``idempotency_keys``, as
every other route's key is kept.  Each existing key becomes a record of the wallet key's
credential (``vw:<wallet key id>``) whose lease has lapsed: a repeat finds the attempt
and is answered from it, as before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 09:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_ROUTE = "POST /spend/pay-url"


def upgrade() -> None:
    with op.batch_alter_table("spend_attempts") as batch:
        batch.add_column(sa.Column("idempotency_record_id", sa.Integer(), nullable=True))
    op.execute(
        sa.text(
            "INSERT INTO idempotency_keys "
            "(scope, route, key, request_hash, state, locked_until, created_at) "
            "SELECT 'vw:' || wallet_key_id, :route, idempotency_key, "
            "COALESCE(request_hash, ''), 'in_flight', created_at, created_at "
            "FROM spend_attempts WHERE idempotency_key IS NOT NULL"
        ).bindparams(route=_ROUTE)
    )
    op.execute(
        sa.text(
            "UPDATE spend_attempts SET idempotency_record_id = ("
            "SELECT k.id FROM idempotency_keys k WHERE k.route = :route "
            "AND k.scope = 'vw:' || spend_attempts.wallet_key_id "
            "AND k.key = spend_attempts.idempotency_key) "
            "WHERE idempotency_key IS NOT NULL"
        ).bindparams(route=_ROUTE)
    )
    with op.batch_alter_table("spend_attempts") as batch:
        batch.drop_constraint("uq_spend_attempts_wallet_key_id_idempotency_key", type_="unique")
        batch.drop_column("idempotency_key")
        batch.create_unique_constraint(
            "uq_spend_attempts_idempotency_record_id", ["idempotency_record_id"]
        )
        batch.create_foreign_key(
            "fk_spend_attempts_idempotency_record_id_idempotency_keys",
            "idempotency_keys",
            ["idempotency_record_id"],
            ["id"],
        )


def downgrade() -> None:
    with op.batch_alter_table("spend_attempts") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=255), nullable=True))
    op.execute(
        sa.text(
            "UPDATE spend_attempts SET idempotency_key = ("
            "SELECT k.key FROM idempotency_keys k "
            "WHERE k.id = spend_attempts.idempotency_record_id)"
        )
    )
    with op.batch_alter_table("spend_attempts") as batch:
        batch.drop_constraint(
            "fk_spend_attempts_idempotency_record_id_idempotency_keys", type_="foreignkey"
        )
        batch.drop_constraint("uq_spend_attempts_idempotency_record_id", type_="unique")
        batch.drop_column("idempotency_record_id")
        batch.create_unique_constraint(
            "uq_spend_attempts_wallet_key_id_idempotency_key", ["wallet_key_id", "idempotency_key"]
        )
    op.execute(
        sa.text("DELETE FROM idempotency_keys WHERE route = :route").bindparams(route=_ROUTE)
    )

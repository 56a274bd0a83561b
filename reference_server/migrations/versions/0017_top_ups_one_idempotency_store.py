"""top_ups.idempotency_record_id: top-ups' keys in the one idempotency store

A top-up named its ``Idempotency-Key`` itself (``top_ups.idempotency_key``, unique per
owner and environment); now it references the key's record in ``idempotency_keys``, as
pay-url's attempts do (0016).  Each existing key becomes a record of the owner's
credential (``owner:<owner id>:<environment>``) whose lease has lapsed, fingerprinted
by amount and method (``top_ups.fingerprint``): a repeat finds the top-up and is
answered from it, as before.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 12:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_ROUTE = "POST /owners/me/top-ups"


def upgrade() -> None:
    with op.batch_alter_table("top_ups") as batch:
        batch.add_column(sa.Column("idempotency_record_id", sa.Integer(), nullable=True))
    op.execute(
        sa.text(
            "INSERT INTO idempotency_keys "
            "(scope, route, key, request_hash, state, locked_until, created_at) "
            "SELECT 'owner:' || owner_id || ':' || environment, :route, idempotency_key, "
            "'top-up:' || CAST(amount_micros AS VARCHAR) || ':' || "
            "CASE WHEN rail = 'card' THEN 'card' ELSE 'crypto' END, "
            "'in_flight', created_at, created_at "
            "FROM top_ups WHERE idempotency_key IS NOT NULL"
        ).bindparams(route=_ROUTE)
    )
    op.execute(
        sa.text(
            "UPDATE top_ups SET idempotency_record_id = ("
            "SELECT k.id FROM idempotency_keys k WHERE k.route = :route "
            "AND k.scope = 'owner:' || top_ups.owner_id || ':' || top_ups.environment "
            "AND k.key = top_ups.idempotency_key) "
            "WHERE idempotency_key IS NOT NULL"
        ).bindparams(route=_ROUTE)
    )
    with op.batch_alter_table("top_ups") as batch:
        batch.drop_constraint("uq_top_ups_owner_id_environment_idempotency_key", type_="unique")
        batch.drop_column("idempotency_key")
        batch.create_unique_constraint(
            "uq_top_ups_idempotency_record_id", ["idempotency_record_id"]
        )
        batch.create_foreign_key(
            "fk_top_ups_idempotency_record_id_idempotency_keys",
            "idempotency_keys",
            ["idempotency_record_id"],
            ["id"],
        )


def downgrade() -> None:
    with op.batch_alter_table("top_ups") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=255), nullable=True))
    op.execute(
        sa.text(
            "UPDATE top_ups SET idempotency_key = ("
            "SELECT k.key FROM idempotency_keys k WHERE k.id = top_ups.idempotency_record_id)"
        )
    )
    with op.batch_alter_table("top_ups") as batch:
        batch.drop_constraint(
            "fk_top_ups_idempotency_record_id_idempotency_keys", type_="foreignkey"
        )
        batch.drop_constraint("uq_top_ups_idempotency_record_id", type_="unique")
        batch.drop_column("idempotency_record_id")
        batch.create_unique_constraint(
            "uq_top_ups_owner_id_environment_idempotency_key",
            ["owner_id", "environment", "idempotency_key"],
        )
    op.execute(
        sa.text("DELETE FROM idempotency_keys WHERE route = :route").bindparams(route=_ROUTE)
    )

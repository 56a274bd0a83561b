"""events remember the request that caused them; listener endpoints when last polled

``events.request_id`` and ``events.traceparent`` (both nullable: an event the worker
records has no request) let the worker's ``webhook delivery`` trace name the originating
request (``svc.origin_request_id``) and link to its trace.  ``webhook_endpoints.listened_at``
is when a ``svc listen`` endpoint was last polled: one not polled for a while is swept.

Revision ID: 0026
Revises: 0024
Create Date: 2026-11-28 13:20:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("request_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("traceparent", sa.String(length=55), nullable=True))
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.add_column(sa.Column("listened_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.drop_column("listened_at")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("traceparent")
        batch.drop_column("request_id")

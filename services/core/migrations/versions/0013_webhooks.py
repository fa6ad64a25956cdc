"""Webhooks: an org's endpoints with their sealed signing secrets, and the deliveries queued
to them (the outbox the changes that raise events write in their own transactions).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("description", sa.String(length=256), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("stalled_after_seconds", sa.Integer(), nullable=False),
        sa.Column("expiring_within_seconds", sa.Integer(), nullable=False),
        sa.Column("thresholds_percent", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "id", name=op.f("pk_webhooks")),
    )
    op.create_index("ix_webhooks_org_create_time", "webhooks", ["org", "create_time"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("webhook_id", sa.String(length=32), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("dedupe", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=32), nullable=False),
        sa.Column("next_attempt_time", UtcDateTime(), nullable=True),
        sa.Column("first_attempt_time", UtcDateTime(), nullable=True),
        sa.Column("last_attempt_time", UtcDateTime(), nullable=True),
        sa.Column("lease_until", UtcDateTime(), nullable=True),
        sa.Column("lease_owner", sa.String(length=32), nullable=False),
        sa.Column("redelivery_of", sa.String(length=32), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("webhook_id", "dedupe", name="uq_webhook_deliveries_webhook_id"),
    )
    op.create_index(
        "ix_webhook_deliveries_org_webhook",
        "webhook_deliveries",
        ["org", "webhook_id", "create_time"],
    )
    op.create_index(
        "ix_webhook_deliveries_status_due", "webhook_deliveries", ["status", "next_attempt_time"]
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_status_due", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_org_webhook", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhooks_org_create_time", table_name="webhooks")
    op.drop_table("webhooks")

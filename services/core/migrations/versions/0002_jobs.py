"""Jobs: the lifecycle's jobs, attempts, events and metrics; idempotency keys; snapshots.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("resource_id", sa.String(length=32), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "method", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=False),
        sa.Column("number", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=True),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("preparation", sa.JSON(), nullable=True),
        sa.Column("progress", sa.JSON(), nullable=True),
        sa.Column("evaluation", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("dataset_sha256", sa.String(length=64), nullable=False),
        sa.Column("model_available", sa.Boolean(), nullable=False),
        sa.Column("failure_code", sa.String(length=64), nullable=False),
        sa.Column("failure_category", sa.String(length=16), nullable=False),
        sa.Column("failure_message", sa.String(length=256), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("event_seq", sa.BigInteger(), nullable=False),
        sa.Column("requested_by", sa.String(length=64), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.Column("preparing_time", UtcDateTime(), nullable=True),
        sa.Column("snapshot_time", UtcDateTime(), nullable=True),
        sa.Column("running_time", UtcDateTime(), nullable=True),
        sa.Column("finalizing_time", UtcDateTime(), nullable=True),
        sa.Column("cancelling_time", UtcDateTime(), nullable=True),
        sa.Column("end_time", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("org", "project", "number", name="uq_jobs_org_project_number"),
    )
    op.create_index("ix_jobs_org_create_time", "jobs", ["org", "create_time"], unique=False)
    op.create_index("ix_jobs_org_status", "jobs", ["org", "status"], unique=False)
    op.create_table(
        "snapshots",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "sha256", name=op.f("pk_snapshots")),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=128), nullable=True),
        sa.Column("resume_from_checkpoint", sa.Boolean(), nullable=False),
        sa.Column("resume_step", sa.Integer(), nullable=True),
        sa.Column("training_seconds", sa.Float(), nullable=True),
        sa.Column("failure_code", sa.String(length=64), nullable=False),
        sa.Column("failure_category", sa.String(length=16), nullable=False),
        sa.Column("failure_message", sa.String(length=256), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("leased_time", UtcDateTime(), nullable=True),
        sa.Column("started_time", UtcDateTime(), nullable=True),
        sa.Column("finalizing_time", UtcDateTime(), nullable=True),
        sa.Column("end_time", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_attempts_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("job_id", "attempt_number", name="uq_attempts_job_id"),
        sa.UniqueConstraint("job_id", "idempotency_key", name="uq_attempts_job_id_key"),
    )
    op.create_table(
        "job_events",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_events_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "seq", name=op.f("pk_job_events")),
    )
    op.create_table(
        "job_metrics",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("attempt_number", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("step", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_metrics_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint(
            "job_id", "attempt_number", "name", "step", name=op.f("pk_job_metrics")
        ),
    )
    op.create_table(
        "snapshot_items",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("snapshot_sha256", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("item_id", sa.String(length=160), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("split", sa.String(length=8), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org", "snapshot_sha256"],
            ["snapshots.org", "snapshots.sha256"],
            name="fk_snapshot_items_snapshot",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "org", "snapshot_sha256", "position", name=op.f("pk_snapshot_items")
        ),
    )
    op.create_index(
        "ix_snapshot_items_item",
        "snapshot_items",
        ["org", "snapshot_sha256", "item_id"],
        unique=False,
    )


def downgrade() -> None:
    for table in (
        "snapshot_items",
        "job_metrics",
        "job_events",
        "attempts",
        "snapshots",
        "jobs",
        "idempotency_keys",
    ):
        op.drop_table(table)

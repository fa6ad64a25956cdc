"""Claims: executors and the tasks they lease.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "executors",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("machine", sa.String(length=63), nullable=False),
        sa.Column("platform", sa.Boolean(), nullable=False),
        sa.Column("offer", sa.JSON(), nullable=False),
        sa.Column("connected", sa.Boolean(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("last_seen", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_executors")),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.Column("machine", sa.String(length=63), nullable=False),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lease_sha256", sa.String(length=64), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires", UtcDateTime(), nullable=True),
        sa.Column("executor_id", sa.String(length=32), nullable=False),
        sa.Column("coordinator", sa.String(length=270), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("devices", sa.Integer(), nullable=False),
        sa.Column("held", sa.BigInteger(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("cancel_sent", sa.Boolean(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("claim_time", UtcDateTime(), nullable=True),
        sa.Column("report_time", UtcDateTime(), nullable=True),
        sa.Column("end_time", UtcDateTime(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_tasks_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        sa.UniqueConstraint("job_id", "attempt_number", "position", name="uq_tasks_job_id"),
    )
    op.create_index("ix_tasks_status_create_time", "tasks", ["status", "create_time"], unique=False)


def downgrade() -> None:
    op.drop_table("tasks")
    op.drop_table("executors")

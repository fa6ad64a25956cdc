"""Artifacts: org keys, objects, job artifacts, provenance records; what a job reads.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_artifacts",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("provenance_record_id", sa.String(length=32), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "job_id", "sha256", name=op.f("pk_job_artifacts")),
    )
    op.create_table(
        "objects",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("retention_policy", sa.String(length=16), nullable=False),
        sa.Column("ttl_seconds", sa.BigInteger(), nullable=True),
        sa.Column("upload_id", sa.String(length=256), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("grant_expires", UtcDateTime(), nullable=True),
        sa.Column("stored_time", UtcDateTime(), nullable=True),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("org", "sha256", name=op.f("pk_objects")),
        sa.UniqueConstraint("id", name="uq_objects_id"),
    )
    op.create_index("ix_objects_org_create_time", "objects", ["org", "create_time"], unique=False)
    op.create_table(
        "org_keys",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", name=op.f("pk_org_keys")),
    )
    op.create_table(
        "provenance_records",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("dataset_sha256", sa.String(length=64), nullable=False),
        sa.Column("artifact_sha256", sa.String(length=64), nullable=False),
        sa.Column("base_model_id", sa.String(length=128), nullable=False),
        sa.Column("base_model_sha256", sa.String(length=64), nullable=False),
        sa.Column("training_config_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.String(length=32), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provenance_records")),
        sa.UniqueConstraint("job_id", name="uq_provenance_records_job_id"),
    )
    with op.batch_alter_table("jobs") as jobs:
        jobs.add_column(
            sa.Column("reads_sha256", sa.String(length=64), nullable=False, server_default="")
        )
        jobs.create_index("ix_jobs_reads_sha256", ["reads_sha256"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as jobs:
        jobs.drop_index("ix_jobs_reads_sha256")
        jobs.drop_column("reads_sha256")
    for table in ("provenance_records", "org_keys", "objects", "job_artifacts"):
        op.drop_table(table)

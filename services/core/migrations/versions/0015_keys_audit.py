"""Keys an org hands out: limits (projects, bases, a monthly spend), an expiry, the last
use, the hashes of rotated secrets; the key that created each job; the audit trail read
newest first and by key.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as keys:
        keys.add_column(sa.Column("projects", sa.JSON(), nullable=True))
        keys.add_column(sa.Column("bases", sa.JSON(), nullable=True))
        keys.add_column(sa.Column("monthly_spend_cap", sa.BigInteger(), nullable=True))
        keys.add_column(sa.Column("expire_time", UtcDateTime(), nullable=True))
        keys.add_column(sa.Column("last_used_time", UtcDateTime(), nullable=True))
    op.create_table(
        "retired_key_hashes",
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("retire_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key_hash", name=op.f("pk_retired_key_hashes")),
    )
    op.create_index(
        op.f("ix_retired_key_hashes_key_id"), "retired_key_hashes", ["key_id"], unique=False
    )
    with op.batch_alter_table("jobs") as jobs:
        jobs.add_column(
            sa.Column("key_id", sa.String(length=32), nullable=False, server_default="")
        )
        jobs.create_index("ix_jobs_key_id", ["key_id"], unique=False)
    op.create_index("ix_audit_events_org_id", "audit_events", ["org", "id"])
    op.create_index("ix_audit_events_org_actor", "audit_events", ["org", "actor"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_org_actor", table_name="audit_events")
    op.drop_index("ix_audit_events_org_id", table_name="audit_events")
    with op.batch_alter_table("jobs") as jobs:
        jobs.drop_index("ix_jobs_key_id")
        jobs.drop_column("key_id")
    op.drop_index(op.f("ix_retired_key_hashes_key_id"), table_name="retired_key_hashes")
    op.drop_table("retired_key_hashes")
    with op.batch_alter_table("api_keys") as keys:
        for column in ("last_used_time", "expire_time", "monthly_spend_cap", "bases", "projects"):
            keys.drop_column(column)

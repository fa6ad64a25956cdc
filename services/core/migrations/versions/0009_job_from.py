"""A job's `from`: the adapter it starts from, which it reads (HIP-1333 §3, §6).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as jobs:
        jobs.add_column(
            sa.Column("from_sha256", sa.String(length=64), nullable=False, server_default="")
        )
        jobs.create_index("ix_jobs_from_sha256", ["from_sha256"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as jobs:
        jobs.drop_index("ix_jobs_from_sha256")
        jobs.drop_column("from_sha256")

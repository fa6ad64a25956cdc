"""Jobs by status and age in every org: the preparers' queue, read after every create.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_status_create_time", "jobs", ["status", "create_time"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_jobs_status_create_time", table_name="jobs")

"""Attempt logs: each attempt's trainer output, in pieces at their byte offsets.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attempt_logs",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("attempt_number", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_attempt_logs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "attempt_number", "offset", name=op.f("pk_attempt_logs")),
    )


def downgrade() -> None:
    op.drop_table("attempt_logs")

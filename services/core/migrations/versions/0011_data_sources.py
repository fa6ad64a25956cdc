"""An org's data sources: S3 endpoints and their sealed credentials (HIP-1333 §3 `s3://`).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "data_sources",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("endpoint", sa.String(length=2048), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "name", name=op.f("pk_data_sources")),
    )


def downgrade() -> None:
    op.drop_table("data_sources")

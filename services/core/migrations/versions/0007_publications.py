"""Publications: a job's output published under a name of its org; what keeps an object
from deletion is now a publication naming it, so the objects' own flag goes.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "publications",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("base_sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("form", sa.String(length=8), nullable=False),
        sa.Column("route", sa.JSON(), nullable=True),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("publish_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "name", name=op.f("pk_publications")),
    )
    op.create_index("ix_publications_org_sha256", "publications", ["org", "sha256"])
    # Nothing ever set it: publishing was not served before this revision.
    with op.batch_alter_table("objects") as batch:
        batch.drop_column("published")


def downgrade() -> None:
    with op.batch_alter_table("objects") as batch:
        batch.add_column(
            sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.drop_index("ix_publications_org_sha256", table_name="publications")
    op.drop_table("publications")

"""Deleted objects: a keyed digest per deletion, so a repeated DELETE is a no-op.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deleted_objects",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("delete_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", "digest", name=op.f("pk_deleted_objects")),
    )


def downgrade() -> None:
    op.drop_table("deleted_objects")

"""The platform: API keys and the audit trail.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("org", sa.String(63), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("label", sa.String(64), nullable=False, server_default=""),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("revoke_time", UtcDateTime(), nullable=True),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_org", "api_keys", ["org"])
    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("org", sa.String(63), nullable=False),
        sa.Column("name", sa.String(96), nullable=False),
        sa.Column("subject", sa.String(96), nullable=False, server_default=""),
        sa.Column("code", sa.String(64), nullable=False, server_default=""),
        sa.Column("actor", sa.String(32), nullable=False, server_default=""),
        sa.Column("request_id", sa.String(64), nullable=False, server_default=""),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_audit_events_org_name", "audit_events", ["org", "name"])


def downgrade() -> None:
    op.drop_table("audit_events")
    op.drop_table("api_keys")

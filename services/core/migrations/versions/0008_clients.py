"""Training clients and their operations (HIP-1333 §7).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clients",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("base_model", sa.String(length=128), nullable=False),
        sa.Column("adaptation", sa.JSON(), nullable=False),
        sa.Column("protect", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("message", sa.String(length=256), nullable=False),
        sa.Column("executor_id", sa.String(length=32), nullable=False),
        sa.Column("charged", sa.Boolean(), nullable=False),
        sa.Column("lease_sha256", sa.String(length=64), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("lease_expires", UtcDateTime(), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("losses", sa.JSON(), nullable=False),
        sa.Column("engine_seconds", sa.Float(), nullable=False),
        sa.Column("cost_micro_cents", sa.BigInteger(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clients")),
    )
    op.create_index("ix_clients_org_create_time", "clients", ["org", "create_time"])
    op.create_index("ix_clients_executor_id_status", "clients", ["executor_id", "status"])
    op.create_table(
        "client_operations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("client_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("input_sha256", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("done_time", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_client_operations")),
        sa.UniqueConstraint("client_id", "seq", name="uq_client_operations_client_id_seq"),
    )


def downgrade() -> None:
    op.drop_table("client_operations")
    op.drop_index("ix_clients_executor_id_status", table_name="clients")
    op.drop_index("ix_clients_org_create_time", table_name="clients")
    op.drop_table("clients")

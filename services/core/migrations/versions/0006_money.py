"""Money: rates, wallets and caps, the double-entry ledger, and task holds.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from services.core.store import UtcDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rates",
        sa.Column("meter", sa.String(length=96), nullable=False),
        sa.Column("micro_cents", sa.BigInteger(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("meter", name=op.f("pk_rates")),
    )
    op.create_table(
        "wallets",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("balance", sa.BigInteger(), nullable=False),
        sa.Column("spend_cap", sa.BigInteger(), nullable=False),
        sa.Column("storage_through", UtcDateTime(), nullable=True),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("org", name=op.f("pk_wallets")),
    )
    op.create_table(
        "spend_caps",
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=False),
        sa.Column("micro_cents", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("org", "project", name=op.f("pk_spend_caps")),
    )
    op.create_table(
        "ledger_entries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("micro_cents", sa.BigInteger(), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=False),
        sa.Column("span", sa.String(length=64), nullable=False),
        sa.Column("quantity", sa.Float(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint("org", "name", name="uq_ledger_entries_org_name"),
    )
    op.create_index("ix_ledger_entries_org_id", "ledger_entries", ["org", "id"])
    op.create_index("ix_ledger_entries_job_id", "ledger_entries", ["job_id"])
    op.create_table(
        "ledger_postings",
        sa.Column("entry_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("account", sa.String(length=96), nullable=False),
        sa.Column("micro_cents", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entry_id"],
            ["ledger_entries.id"],
            name=op.f("fk_ledger_postings_entry_id_ledger_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entry_id", "account", name=op.f("pk_ledger_postings")),
    )
    op.create_table(
        "holds",
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("org", sa.String(length=63), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("project", sa.String(length=63), nullable=False),
        sa.Column("charged", sa.Boolean(), nullable=False),
        sa.Column("meter", sa.String(length=96), nullable=False),
        sa.Column("rate", sa.BigInteger(), nullable=False),
        sa.Column("devices", sa.Integer(), nullable=False),
        sa.Column("held_seconds", sa.BigInteger(), nullable=False),
        sa.Column("used_seconds", sa.BigInteger(), nullable=False),
        sa.Column("charged_micro_cents", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("refusal", sa.String(length=32), nullable=False),
        sa.Column("start_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "epoch", name=op.f("pk_holds")),
    )
    op.create_index("ix_holds_org_status", "holds", ["org", "status"])
    op.create_index("ix_holds_job_id", "holds", ["job_id"])


def downgrade() -> None:
    for table in ("holds", "ledger_postings", "ledger_entries", "spend_caps", "wallets", "rates"):
        op.drop_table(table)

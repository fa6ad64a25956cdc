"""The rows a report writes by the hundred (a job's events, metric points and log pieces)
no longer carry a foreign key to their job. Each is written only by a unit of work that
holds the job's row locked, and jobs are never deleted, so the key checked nothing the lock
did not; on PostgreSQL its per-row check was a third of a report's commit.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("job_events", "job_metrics", "attempt_logs")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as rows:
            rows.drop_constraint(op.f(f"fk_{table}_job_id_jobs"), type_="foreignkey")


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as rows:
            rows.create_foreign_key(
                op.f(f"fk_{table}_job_id_jobs"), "jobs", ["job_id"], ["id"], ondelete="CASCADE"
            )

"""Many environments: the runs one request queued share a ``batch_id`` (docs/monitoring.md).

Revision ID: 0006_run_batches
Revises: 0005_run_retries
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_run_batches"
down_revision = "0005_run_retries"
branch_labels = None
depends_on = None


# Plain ALTER TABLE, never a batch copy: SQLite would recreate ``runs`` and lose run_counts' triggers.


def upgrade() -> None:
    op.add_column("runs", sa.Column("batch_id", sa.Uuid(), nullable=True))
    op.create_index("ix_runs_batch_id", "runs", ["batch_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_batch_id", "runs")
    op.drop_column("runs", "batch_id")

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


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("batch_id", sa.Uuid(), nullable=True))
        batch.create_index("ix_runs_batch_id", ["batch_id"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_batch_id")
        batch.drop_column("batch_id")

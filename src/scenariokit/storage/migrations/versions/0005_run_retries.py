"""Retries: a scenario's ``retries``, a run's ``attempts`` and whether it was ``flaky`` (docs/monitoring.md).

Revision ID: 0005_run_retries
Revises: 0004_run_counts
Create Date: 2026-11-23
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_run_retries"
down_revision = "0004_run_counts"
branch_labels = None
depends_on = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("scenarios") as batch:
        # NULL reads as the default: no retries (a scenario stored before this revision).
        batch.add_column(sa.Column("retries", _json(), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("attempts", _json(), nullable=True))
        batch.add_column(sa.Column("flaky", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("flaky")
        batch.drop_column("attempts")
    with op.batch_alter_table("scenarios") as batch:
        batch.drop_column("retries")

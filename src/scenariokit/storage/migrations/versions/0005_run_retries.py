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


# Plain ALTER TABLE, never a batch copy: SQLite would recreate ``runs`` and lose run_counts' triggers.


def upgrade() -> None:
    # NULL reads as the default: no retries (a scenario stored before this revision).
    op.add_column("scenarios", sa.Column("retries", _json(), nullable=True))
    op.add_column("runs", sa.Column("attempts", _json(), nullable=True))
    op.add_column("runs", sa.Column("flaky", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("runs", "flaky")
    op.drop_column("runs", "attempts")
    op.drop_column("scenarios", "retries")

"""Runs keep their timeline: where each run's time went, phase by phase (``timings``).

Revision ID: 0003_run_timings
Revises: 0002_key_fingerprint
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003_run_timings"
down_revision = "0002_key_fingerprint"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column(
                "timings",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("timings")

"""Schedules: runs queued on a cron or an interval, each fire claimed once (docs/monitoring.md).

Revision ID: 0007_schedules
Revises: 0006_run_batches
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_schedules"
down_revision = "0006_run_batches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("scenario_id", sa.Uuid(), nullable=False),
        sa.Column(
            "environment_ids",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("cron", sa.String(200), nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("last_fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"],
            ["scenarios.id"],
            name="fk_schedules_scenario_id_scenarios",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_created_at_id", "schedules", ["created_at", "id"])
    op.create_index("ix_schedules_updated_at_id", "schedules", ["updated_at", "id"])
    op.create_index("ix_schedules_next_fire_at_id", "schedules", ["next_fire_at", "id"])
    op.create_index("ix_schedules_scenario_id", "schedules", ["scenario_id"])
    # plain ALTER TABLE, never a batch copy: SQLite would recreate ``runs`` and lose run_counts' triggers
    op.add_column("runs", sa.Column("schedule_id", sa.Uuid(), nullable=True))
    op.create_index("ix_runs_schedule_id", "runs", ["schedule_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_schedule_id", "runs")
    op.drop_column("runs", "schedule_id")
    op.drop_table("schedules")

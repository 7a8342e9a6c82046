"""The audit log: one row per write through any door (docs/deployment.md, "Audit log").

Revision ID: 0008_audit_log
Revises: 0007_schedules
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_audit_log"
down_revision = "0007_schedules"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_name", sa.String(64), nullable=True),
        sa.Column("door", sa.String(16), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("resource", sa.String(32), nullable=False),
        sa.Column("resource_id", sa.Uuid(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at_id", "audit_log", ["at", "id"])
    op.create_index("ix_audit_log_resource_at", "audit_log", ["resource", "at"])
    op.create_index("ix_audit_log_token_name_at", "audit_log", ["token_name", "at"])


def downgrade() -> None:
    op.drop_table("audit_log")

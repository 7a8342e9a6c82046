"""Browser settings: ``browser`` on environments and scenarios, and the settings a run executed with.

NULL reads as "nothing set" (docs/browser.md), so rows stored before this revision keep Playwright's
default desktop context.

Revision ID: 0009_browser_settings_b33
Revises: 0008_audit_log
Create Date: 2026-11-26
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009_browser_settings_b33"
down_revision = "0008_audit_log"
branch_labels = None
depends_on = None

TABLES = ("environments", "scenarios", "runs")


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("browser", _json(), nullable=True))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("browser")

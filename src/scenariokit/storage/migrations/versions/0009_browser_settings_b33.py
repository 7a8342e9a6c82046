"""Browser settings: ``browser`` on environments and scenarios, and the settings a run executed with.

NULL reads as "nothing set" (docs/browser.md), so rows stored before this revision keep Playwright's
default desktop context.

Revision ID: 0009_browser_settings_b33
Revises: 0008_i29_scenario_revisions
Create Date: 2026-11-26
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009_browser_settings_b33"
down_revision = "0008_i29_scenario_revisions"
branch_labels = None
depends_on = None

TABLES = ("environments", "scenarios", "runs")


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


# Plain ALTER TABLE, never a batch: on SQLite a batch copies the table and drops the old one, and
# dropping ``scenarios`` would take every run with it (ON DELETE CASCADE). SQLite 3.35+ drops columns.
def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("browser", _json(), nullable=True))


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_column(table, "browser")

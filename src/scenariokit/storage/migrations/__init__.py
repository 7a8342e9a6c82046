"""Alembic migrations, applied automatically by the embedded default and by ``scenariokit db upgrade``."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

HERE = Path(__file__).parent


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An alembic configuration pointing at these migrations, bound to ``connection`` when given."""
    config = Config()
    config.set_main_option("script_location", str(HERE))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_connection(connection: sa.Connection) -> None:
    """Upgrade the database behind ``connection`` to the newest revision."""
    command.upgrade(alembic_config(connection), "head")


def current_revision(connection: sa.Connection) -> str | None:
    """The revision the database is at."""
    return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    """The newest revision these migrations define: what ``upgrade`` brings a database to."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()

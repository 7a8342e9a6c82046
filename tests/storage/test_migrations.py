"""The alembic migrations build exactly the schema the adapter's tables describe."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from scenariokit.storage.migrations import head_revision
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy.tables import metadata


def _diff(connection: sa.Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_migrated_schema_matches_the_tables(store: SqlStore) -> None:
    assert await store.current_revision() == head_revision()
    async with store.engine.connect() as conn:
        assert await conn.run_sync(_diff) == []


def test_the_head_revision_is_the_newest_migration() -> None:
    assert head_revision() == "0011_run_counts_by_environment"


async def test_upgrade_is_idempotent(store: SqlStore) -> None:
    await store.upgrade()
    assert await store.current_revision() == head_revision()

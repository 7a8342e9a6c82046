"""What the store benchmarks share: their tables made ready to read after a burst of writes."""

from __future__ import annotations

import sqlalchemy as sa

from scenariokit.storage.sqlalchemy import SqlStore


async def analyzed(store: SqlStore, *tables: str) -> None:
    """What the database's own upkeep does to ``tables`` after a burst of writes, done now: on
    PostgreSQL ``VACUUM ANALYZE`` (the old versions of rows updated again and again pruned, the
    planner's statistics made), on SQLite ``ANALYZE``."""
    if store.dialect == "postgresql":
        async with store.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for table in tables:
                await conn.execute(sa.text(f"VACUUM ANALYZE {table}"))
        return
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("ANALYZE"))

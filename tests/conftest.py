"""Fixtures shared by the whole suite: stores on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from json_services import json_services
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema
from scenariokit.storage.sqlalchemy.tables import store_metadata

PG_BASE_URL = os.environ.get("SCENARIOKIT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
_pg_state: dict[str, str | None] = {}


def postgres_unreachable_reason() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when the server answers."""
    if "reason" not in _pg_state:

        async def probe() -> None:
            import asyncpg

            dsn = PG_BASE_URL.replace("postgresql+asyncpg://", "postgresql://")
            conn = await asyncio.wait_for(asyncpg.connect(dsn), timeout=3)
            await conn.close()

        try:
            asyncio.run(probe())
            _pg_state["reason"] = None
        except Exception as exc:  # any failure to connect means: skip, and say why
            _pg_state["reason"] = f"PostgreSQL at {PG_BASE_URL} is unreachable: {type(exc).__name__}: {exc}"
    return _pg_state["reason"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests that need PostgreSQL, with the reason, when no server answers."""
    needs_pg = [item for item in items if "postgres" in item.keywords]
    if not needs_pg:
        return
    reason = postgres_unreachable_reason()
    if reason:
        for item in needs_pg:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("SCENARIOKIT_SECRET_KEY", "test-secret-key")


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated, empty SQLite database file for tests to copy (copying is faster than migrating)."""
    path = tmp_path_factory.mktemp("template") / "scenariokit.db"

    async def migrate() -> None:
        store = await open_store(f"sqlite:///{path}", secret_key="test-secret-key")
        assert isinstance(store, SqlStore)
        async with store.engine.begin() as conn:
            # Each copy takes the key of the test that opens it (the salt stays: derivations are cached).
            await conn.execute(sa.delete(store_metadata).where(store_metadata.c.name == "key_fingerprints"))
        await store.close()

    asyncio.run(migrate())
    return path


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> str:
    """A fresh database URL: a SQLite file in tmp_path, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/scenariokit.db"
    return f"{PG_BASE_URL}?schema={unique_schema('t')}"


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[SqlStore]:
    """A migrated, empty store on each database; a PostgreSQL schema is dropped afterwards."""
    opened = await open_store(database_url, secret_key="test-secret-key")
    assert isinstance(opened, SqlStore)
    try:
        yield opened
    finally:
        await opened.drop_schema()
        await opened.close()


@pytest.fixture
async def services(store: SqlStore) -> Services:
    """The application services over the store."""
    return json_services(Services(store))

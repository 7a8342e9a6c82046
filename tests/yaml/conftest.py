"""Fixtures of the YAML tests: a varied set of records, a second empty store, a SQLite-only store."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from transfer_records import FixtureSet, populate

from json_services import json_services
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore, unique_schema

PG_BASE_URL = os.environ.get("SCENARIOKIT_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


@pytest.fixture
async def fixture_set(services: Services) -> FixtureSet:
    """The varied record set, stored."""
    return await populate(services)


@pytest.fixture
async def lite(tmp_path: Path) -> AsyncIterator[Services]:
    """Services over a SQLite store, for the tests that need no second database."""
    store = await open_store(f"sqlite:///{tmp_path}/lite.db", secret_key="test-secret-key")
    try:
        yield json_services(Services(store))
    finally:
        await store.close()


@pytest.fixture
async def lite_set(lite: Services) -> FixtureSet:
    """The varied record set, stored in the SQLite-only store."""
    return await populate(lite)


@pytest.fixture
async def lite_other(tmp_path: Path) -> AsyncIterator[Services]:
    """A second SQLite store."""
    store = await open_store(f"sqlite:///{tmp_path}/lite-other.db", secret_key="another-secret-key")
    try:
        yield json_services(Services(store))
    finally:
        await store.close()


@pytest.fixture
async def other_services(database_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    """A second, empty store on the same database kind as ``services``."""
    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path}/other.db"
    else:
        url = f"{PG_BASE_URL}?schema={unique_schema('y')}"
    store = await open_store(url, secret_key="another-secret-key")
    assert isinstance(store, SqlStore)
    try:
        yield json_services(Services(store))
    finally:
        await store.drop_schema()
        await store.close()

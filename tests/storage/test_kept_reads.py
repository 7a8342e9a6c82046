"""A reading unit of work hands its connection to the next rather than giving it back to the pool (on a
SQLite file and on PostgreSQL): the next reads what was written since, and on PostgreSQL a connection a
database restart broke is not handed out again (storage/sqlalchemy/store.py, ``KeptReads``)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa

from scenariokit.storage.sqlalchemy import store as store_module
from scenariokit.storage.sqlalchemy.store import SqlStore


async def _read_names(store: SqlStore) -> tuple[Any, list[str]]:
    """The connection a reading unit of work used, and the environments' names it read."""
    from scenariokit.formats.queries import EnvironmentQuery

    async with store.unit_of_work(readonly=True) as uow:
        connection = uow._conn
        page = await uow.environments.list(EnvironmentQuery.from_params({}))
    return connection, [item.name for item in page.items]


async def test_the_next_read_takes_the_kept_connection_and_reads_what_was_written_since(
    store: SqlStore, services: Any
) -> None:
    await services.environments.create({"name": "first", "data": {}})
    kept, names = await _read_names(store)
    assert names == ["first"]
    assert store.kept_reads is not None and store.kept_reads.connections == [kept]
    await services.environments.create({"name": "second", "data": {}})
    again, names = await _read_names(store)
    assert again is kept
    assert sorted(names) == ["first", "second"]


async def _backend_pid(connection: Any) -> int:
    return int((await connection.exec_driver_sql("SELECT pg_backend_pid()")).scalar_one())


async def _terminate(store: SqlStore, pids: list[int]) -> None:
    """End the backends ``pids`` from a connection of another client, as a database restart would."""
    other = await asyncpg.connect(store.url.split("?")[0].replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for pid in pids:
            await other.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await other.close()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_kept_connection_idle_a_while_is_pinged_and_replaced_when_gone(
    store: SqlStore, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await services.environments.create({"name": "staging", "data": {}})
    kept, _ = await _read_names(store)
    async with store.unit_of_work(readonly=True) as uow:
        pid = await _backend_pid(uow._conn)
    await _terminate(store, [pid])
    monkeypatch.setattr(store_module, "IDLE_PING_SECONDS", 0.0)  # every kept connection counts as idle
    replaced, names = await _read_names(store)
    assert names == ["staging"]
    assert replaced is not kept


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_once_a_connection_is_found_broken_those_kept_before_are_not_handed_out(
    store: SqlStore, services: Any
) -> None:
    await services.environments.create({"name": "staging", "data": {}})
    opened = [store.unit_of_work(readonly=True) for _ in range(2)]
    units = [await unit.__aenter__() for unit in opened]
    pids = [await _backend_pid(unit._conn) for unit in units]
    for unit in opened:
        await unit.__aexit__(None, None, None)
    assert store.kept_reads is not None and len(store.kept_reads.connections) == 2
    await _terminate(store, pids)
    # used a moment ago, so not pinged: the first read finds its connection gone and fails, as a pooled
    # connection would; the other kept one is then closed rather than failing the next read too
    broken = store.kept_reads.connections
    with pytest.raises(sa.exc.DBAPIError):
        await _read_names(store)
    fresh, names = await _read_names(store)
    assert names == ["staging"]
    assert fresh not in broken
    assert store.kept_reads.connections == [fresh]

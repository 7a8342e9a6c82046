"""What a page of scenarios costs the database, counted in statements (the page a dashboard polls).

On PostgreSQL a page is one statement (one round trip); on SQLite, where a statement costs no round
trip, two: the page's rows with their total, then their steps and links (docs/performance.md,
"The API under load"). A reading unit of work sends no ``BEGIN`` on either. Counted by what the
driver itself runs: the page goes to it straight, past SQLAlchemy's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from json_services import json_services
from scenariokit.formats.queries import EnvironmentQuery, ScenarioQuery
from scenariokit.services import Services
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.listing import page_sql
from scenariokit.storage.sqlalchemy.repositories import _by_ids
from scenariokit.storage.sqlalchemy.store import SqlUnitOfWork


@contextlib.asynccontextmanager
async def reading(store: SqlStore) -> AsyncIterator[tuple[SqlUnitOfWork, list[str]]]:
    """A reading unit of work, and the statements its driver connection runs inside the block."""
    seen: list[str] = []
    async with store.unit_of_work(readonly=True) as uow:
        raw: Any = (await uow._conn.get_raw_connection()).driver_connection  # type: ignore[union-attr]
        if store.dialect == "postgresql":

            def log(record: Any) -> None:
                seen.append(" ".join(record.query.split()))

            raw.add_query_logger(log)
            try:
                yield uow, seen
            finally:
                await asyncio.sleep(0)  # asyncpg calls its loggers soon after each query, not at once
                raw.remove_query_logger(log)
        else:
            raw._conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split())))
            try:
                yield uow, seen
            finally:
                raw._conn.set_trace_callback(None)


async def _seed(services: Any, count: int) -> None:
    credential = await services.credentials.create({"name": "login", "secret": "s3cret"})
    for index in range(count):
        links = [{"credentialId": str(credential.id), "alias": "login"}] if index % 2 else []
        steps = [{"execCode": f"step = {n}"} for n in range(3)]
        await services.scenarios.create({"name": f"s{index:02d}", "steps": steps, "credentials": links})


async def test_a_page_of_scenarios_is_one_statement_on_postgresql_and_two_on_sqlite(
    services: Any, store: SqlStore
) -> None:
    await _seed(services, 25)
    query = ScenarioQuery.from_params({"limit": "20", "orderBy": "name", "orderDir": "asc"})
    async with reading(store) as (uow, statements):
        page = await uow.scenarios.list_records(query)
    expected = 1 if store.dialect == "postgresql" else 2
    assert len(statements) == expected, statements
    assert not any(sql.upper().startswith(("BEGIN", "ROLLBACK", "COMMIT")) for sql in statements)
    assert page.total == 25 and [item.name for item in page.items] == [f"s{i:02d}" for i in range(20)]
    assert all(len(item.steps) == 3 for item in page.items)
    assert [len(item.credentials) for item in page.items] == [i % 2 for i in range(20)]


async def test_a_searched_page_of_scenarios_runs_its_search_once(services: Any, store: SqlStore) -> None:
    # A search reads every name: its matches are counted with a window as it reads them, and the page's
    # steps and links are found by the page's ids. Before, SQLite ran it four times (the page, its count,
    # and again for the steps and for the links), PostgreSQL twice.
    await _seed(services, 25)
    query = ScenarioQuery.from_params({"limit": "5", "orderBy": "name", "orderDir": "asc", "q": "s1"})
    async with reading(store) as (uow, statements):
        page = await uow.scenarios.list_records(query)
    assert sum(sql.upper().count(" LIKE ") for sql in statements) == 1, statements
    assert page.total == 10 and [item.name for item in page.items] == [f"s{i}" for i in range(10, 15)]
    assert all(len(item.steps) == 3 for item in page.items)
    assert [len(item.credentials) for item in page.items] == [i % 2 for i in range(10, 15)]


async def test_a_page_past_the_last_counts_in_one_more_statement(services: Any, store: SqlStore) -> None:
    await _seed(services, 3)
    query = ScenarioQuery.from_params({"limit": "20", "page": "2"})
    async with reading(store) as (uow, statements):
        page = await uow.scenarios.list_records(query)
    # no rows carry the total: the page's statement, then the count (SQLite: no children to read)
    assert len(statements) == 2, statements
    assert page.total == 3 and page.items == ()


@pytest.mark.parametrize("searched", [False, True], ids=["unfiltered", "searched"])
async def test_a_page_of_a_list_counts_its_table_beside_the_rows_and_sorts_no_more_than_the_matches(
    services: Any, store: SqlStore, searched: bool
) -> None:
    # Unfiltered, the total is a count of the table (SQLite counts its B-tree without reading a row) and
    # the page walks the order's index for its rows; a window count read and sorted every row of the
    # table for each page. A search reads every row anyway: its window sorts only the matches.
    for index in range(30):
        await services.environments.create({"name": f"env {index:02d}"})
    params = {"limit": "5", "orderBy": "name", "orderDir": "asc"} | ({"q": "env 1"} if searched else {})
    statements: list[str] = []
    parameters: list[Any] = []

    def record(conn: Any, cursor: Any, statement: str, sent: Any, *_: Any) -> None:
        statements.append(" ".join(statement.split()))
        parameters.append(sent)

    engines = {store.engine, store.read_engine} - {None}
    for engine in engines:
        sa.event.listen(engine.sync_engine, "before_cursor_execute", record)  # type: ignore[union-attr]
    try:
        async with store.unit_of_work(readonly=True) as uow:
            page = await uow.environments.list(EnvironmentQuery.from_params(params))
    finally:
        for engine in engines:
            sa.event.remove(engine.sync_engine, "before_cursor_execute", record)  # type: ignore[union-attr]
    [(listed, sent)] = [
        (sql, sent) for sql, sent in zip(statements, parameters, strict=True) if "FROM environments" in sql
    ]
    if searched:
        assert page.total == 10 and " OVER " in listed.upper()
        assert [item.name for item in page.items] == [f"env {i}" for i in range(10, 15)]
        return
    assert page.total == 30 and " OVER " not in listed.upper() and "COUNT(*)" in listed.upper()
    assert [item.name for item in page.items] == [f"env {i:02d}" for i in range(5)]
    if store.dialect == "sqlite":
        async with store.unit_of_work(readonly=True) as uow:
            raw: Any = (await uow._conn.get_raw_connection()).driver_connection  # type: ignore[union-attr]
            rows = await raw.execute_fetchall(f"EXPLAIN QUERY PLAN {listed}", sent)
            plan = " ".join(str(row[-1]) for row in rows)
        assert "TEMP B-TREE" not in plan, plan


#: the ``store`` fixture (tests/conftest.py) on its PostgreSQL parameter alone
postgresql_only = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


@pytest.mark.postgres
@postgresql_only
async def test_on_postgresql_a_page_reads_its_steps_through_their_index(store: SqlStore) -> None:
    # Enough scenarios that the page's steps are a small part of all: a hash join over every step of
    # the store is what the planner had picked for the join this statement replaced.
    services = json_services(Services(store))
    await _seed(services, 25)
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO scenarios (id, name, description, timeout_seconds, created_at, updated_at, "
            "retries, browser, revision) SELECT gen_random_uuid(), 'z' || g, '', 60, now(), now(), "
            "'{}', '{}', 1 FROM generate_series(1, 2000) AS g"
        )
        await conn.exec_driver_sql(
            "INSERT INTO steps (id, scenario_id, position, title, exec_code, timeout_seconds) "
            "SELECT gen_random_uuid(), s.id, g, 't', 'x = 1', 5 "
            "FROM scenarios AS s, generate_series(0, 2) AS g WHERE s.name LIKE 'z%'"
        )
        await conn.exec_driver_sql("ANALYZE")
    sql = page_sql("postgresql", "name", "asc", searched=False)
    async with store.unit_of_work(readonly=True) as uow:
        raw: Any = (await uow._conn.get_raw_connection()).driver_connection  # type: ignore[union-attr]
        plan = "\n".join(row[0] for row in await raw.fetch(f"EXPLAIN {sql}", 20, 0))
        query = ScenarioQuery.from_params({"limit": "20", "orderBy": "name", "orderDir": "asc"})
        page = await uow.scenarios.list_records(query)
    assert "Seq Scan on steps" not in plan, plan  # (a dozen links: scanning them all is right)
    assert "Index Cond: (scenario_id = ANY" in plan.split("on steps", 1)[1], plan
    assert [item.name for item in page.items] == [f"s{i:02d}" for i in range(20)]
    assert all(len(item.steps) == 3 for item in page.items)
    assert [len(item.credentials) for item in page.items] == [i % 2 for i in range(20)]


@pytest.mark.postgres
@postgresql_only
async def test_on_postgresql_a_burst_of_requests_opens_no_connection_past_the_pools(store: SqlStore) -> None:
    # A pool that opened overflow connections for a burst closed each one on its return: under a
    # dashboard's 32 connections that was hundreds of PostgreSQL backends started and ended a minute.
    services = json_services(Services(store))
    await _seed(services, 3)
    query = ScenarioQuery.from_params({"limit": "20"})

    async def page() -> None:
        async with store.unit_of_work(readonly=True) as uow:
            await uow.scenarios.list_records(query)
            await asyncio.sleep(0.01)  # held a moment, as under load

    async def create(index: int) -> None:
        await services.scenarios.create({"name": f"burst {index}", "steps": [{"execCode": "x = 1"}]})

    opened: list[str] = []
    for engine in (store.engine, store.read_engine):
        sa.event.listen(engine.sync_engine, "connect", lambda *_: opened.append("one"))
    for _ in range(3):
        await asyncio.gather(*(page() for _ in range(32)), *(create(i) for i in range(16)))
    warmed = len(opened)
    for round_ in range(3):
        await asyncio.gather(*(page() for _ in range(32)), *(create(100 * round_ + i) for i in range(16)))
    assert len(opened) == warmed  # the same connections served every burst: none opened, none closed
    assert warmed <= 20  # ten for writes, ten for reads


async def test_records_by_their_ids_come_from_a_statement_built_once(services: Any, store: SqlStore) -> None:
    # A page of runs reads its environments and sessions this way: a statement built once, its ids a
    # parameter of any length (none, one, several, one that names nothing).
    made = [await services.environments.create({"name": f"e{i}", "data": {}}) for i in range(3)]
    wanted = [made[0].id, made[2].id, uuid.uuid4()]
    async with store.unit_of_work(readonly=True) as uow:
        found = await uow.environments.get_many(wanted)
        one = await uow.environments.get_many([made[1].id])
        none = await uow.environments.get_many([])
    assert sorted(env.name for env in found) == ["e0", "e2"]
    assert [env.name for env in one] == ["e1"] and none == []
    assert _by_ids(t.environments) is _by_ids(t.environments)

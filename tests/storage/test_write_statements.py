"""What a create sends to the database: one INSERT per table, its values as parameters, nothing deleted;
and what an edit sends: the steps that changed, no more.

A create is a quarter of the dashboard load (docs/performance.md, "The API under load"). Its rows
go through INSERT statements built once per table (on SQLite sent to the driver straight), so
SQLAlchemy neither builds nor keys a new statement per row, and a new scenario's steps and links are
inserted without first deleting children it cannot have. Checked on SQLite and PostgreSQL by the
statements the database receives.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from json_services import json_services
from scenariokit.domain.errors import Conflict
from scenariokit.domain.model import Environment, Scenario, Step
from scenariokit.formats.queries import EnvironmentQuery, ScenarioQuery
from scenariokit.services import Services
from scenariokit.storage.opening import open_store
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t
from scenariokit.storage.sqlalchemy.inserts import DRAW_BLOCK


@contextmanager
def sent(store: SqlStore) -> Iterator[list[tuple[str, Any]]]:
    """The statements (SQL text, parameters) the database receives while the block runs.

    PostgreSQL: what SQLAlchemy sends. SQLite: what SQLite itself runs, as its trace callback sees it
    (the repositories' INSERTs go to the driver straight, past SQLAlchemy's events); no parameters.
    """
    seen: list[tuple[str, Any]] = []
    engines = {store.engine, store.read_engine, store.write_engine} - {None}
    traced: list[Any] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        seen.append((" ".join(statement.split()), parameters))

    def trace(dbapi_connection: Any, *_: Any) -> None:
        connection = dbapi_connection.driver_connection._conn  # aiosqlite's sqlite3 connection
        connection.set_trace_callback(lambda statement: seen.append((" ".join(statement.split()), None)))
        traced.append(connection)

    event_name, listener = (
        ("checkout", trace) if store.dialect == "sqlite" else ("before_cursor_execute", record)
    )
    for engine in engines:
        event.listen(engine.sync_engine, event_name, listener)  # type: ignore[union-attr]
    if store.dialect == "sqlite" and store.kept_reads is not None:
        for kept in store.kept_reads.connections:  # read connections the store keeps: checked out already
            trace(kept.sync_connection.connection)  # type: ignore[union-attr]
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine.sync_engine, event_name, listener)  # type: ignore[union-attr]
        for connection in traced:
            connection.set_trace_callback(None)


def inserted(statements: list[str]) -> list[str]:
    """The tables the statements insert into, in the order the SQL names them (``WITH`` clauses first)."""
    return [table for sql in statements for table in re.findall(r"INSERT INTO (\w+)", sql)]


async def test_creating_a_scenario_inserts_each_table_once_and_deletes_nothing(
    services: Any, store: SqlStore
) -> None:
    credential = await services.credentials.create({"name": "login", "secret": "s3cret"})
    # on PostgreSQL the first create draws the numbers of revisions' fields and step bodies
    await services.scenarios.create({"name": "first", "steps": [{"execCode": "pass"}]})
    body = {
        "name": "two steps",
        "steps": [{"execCode": "a = 1"}, {"execCode": "b = 2"}],
        "credentials": [{"credentialId": str(credential.id), "alias": "login"}],
    }
    with sent(store) as statements:
        created = await services.scenarios.create(body)
    writes = [sql for sql, _ in statements if re.match(r"(WITH|INSERT|UPDATE|DELETE)\b", sql)]
    assert not any(re.search(r"\b(UPDATE|DELETE)\b", sql) for sql in writes)
    # one INSERT per table: SQLite traces a statement run for several rows once per row
    assert [table for table, _ in itertools.groupby(inserted(writes))] == [
        "scenarios",
        "steps",
        "scenario_credentials",
        "revision_fields",  # revision 1: its fields, its step bodies, its row
        "revision_steps",
        "scenario_revisions",
        "audit_log",
    ]
    if store.dialect == "postgresql":
        # one round trip besides BEGIN and COMMIT: every row is held for the commit, the numbers of the
        # revision's fields and step bodies drawn ahead, so no INSERT has to answer them
        assert [inserted([sql]) for sql in writes] == [
            [
                "scenarios",
                "steps",
                "scenario_credentials",
                "revision_fields",
                "revision_steps",
                "scenario_revisions",
                "audit_log",
            ]
        ]
        # and nothing else: the credential the scenario links is read, then every row goes
        assert [sql.split()[0] for sql, _ in statements] == ["SELECT", "WITH"], statements
    read = await services.scenarios.get(created.id)
    assert [step.exec_code for step in read.steps] == ["a = 1", "b = 2"]
    assert [link.alias for link in read.credentials] == ["login"]


async def test_a_new_scenario_s_first_revision_looks_nothing_up(services: Any, store: SqlStore) -> None:
    # the keys are checked at the first write; on PostgreSQL it draws numbers of fields and step bodies
    await services.scenarios.create({"name": "warm", "steps": [{"execCode": "pass"}]})
    body = {"name": "new", "steps": [{"execCode": "a = 1"}, {"execCode": "b = 2"}]}
    with sent(store) as statements:
        created = await services.scenarios.create(body)
    # revision 1: nothing of a new scenario is stored, so its fields and step bodies are not looked for
    assert [sql for sql, _ in statements if sql.startswith("SELECT")] == []
    revision = await services.revisions.get(created.id, 1)
    assert [step.exec_code for step in revision.content.steps] == ["a = 1", "b = 2"]


async def test_a_later_revision_reuses_the_bodies_and_fields_it_finds(services: Any, store: SqlStore) -> None:
    created = await services.scenarios.create({"name": "s", "steps": [{"execCode": "a = 1"}]})
    await services.scenarios.update(created.id, {"name": "renamed"})
    with sent(store) as statements:
        await services.scenarios.update(created.id, {"name": "s"})  # back to revision 1's fields and step
    tables = inserted([sql for sql, _ in statements])
    assert "revision_fields" not in tables and "revision_steps" not in tables
    assert "scenario_revisions" in tables
    revision = await services.revisions.get(created.id, 3)
    assert revision.content.name == "s" and [step.exec_code for step in revision.content.steps] == ["a = 1"]


async def test_a_row_inserted_after_a_commit_goes_with_the_next_transaction(store: SqlStore) -> None:
    async with store.unit_of_work() as uow:
        await uow.environments.add(Environment(name="kept"))
        await uow.commit()
        await uow.environments.add(Environment(name="dropped"))  # left without a commit: rolled back
    async with store.unit_of_work(readonly=True) as uow:
        page = await uow.environments.list(EnvironmentQuery.from_params({}))
    assert [environment.name for environment in page.items] == ["kept"]


async def test_a_unit_of_work_reads_the_rows_it_has_just_inserted(store: SqlStore) -> None:
    # On PostgreSQL the rows wait for the next statement: every read of the unit of work is one.
    scenario = Scenario(name="fresh", steps=(Step(exec_code="a = 1"), Step(exec_code="b = 2")))
    async with store.unit_of_work() as uow:
        await uow.environments.add(Environment(name="env"))
        await uow.scenarios.add(scenario)
        listed = await uow.environments.list(EnvironmentQuery.from_params({}))  # through SQLAlchemy
        page = await uow.scenarios.list_records(ScenarioQuery.from_params({}))  # through the driver
        got = await uow.scenarios.get(scenario.id)
        await uow.commit()
    assert [environment.name for environment in listed.items] == ["env"]
    assert [(item.name, len(item.steps)) for item in page.items] == [("fresh", 2)]
    assert got is not None and [step.exec_code for step in got.steps] == ["a = 1", "b = 2"]


async def test_held_rows_that_break_a_constraint_are_refused_at_the_commit_and_nothing_is_kept(
    store: SqlStore,
) -> None:
    async with store.unit_of_work() as uow:
        await uow.environments.add(Environment(name="kept"))
        await uow.commit()
    with pytest.raises(Conflict):
        async with store.unit_of_work() as uow:
            await uow.environments.add(Environment(name="gone with the rest"))
            orphan = Scenario(name="orphan", environment_id=uuid.uuid4())  # no such environment
            await uow.scenarios.add(orphan)
            await uow.commit()
    async with store.unit_of_work(readonly=True) as uow:
        environments = await uow.environments.list(EnvironmentQuery.from_params({}))
        scenarios = await uow.scenarios.list_records(ScenarioQuery.from_params({}))
    assert [environment.name for environment in environments.items] == ["kept"]
    assert scenarios.total == 0
    async with store.unit_of_work() as uow:  # the connection went back clean: nothing held is sent later
        await uow.environments.add(Environment(name="next"))
        await uow.commit()
    async with store.unit_of_work(readonly=True) as uow:
        names = {e.name for e in (await uow.environments.list(EnvironmentQuery.from_params({}))).items}
    assert names == {"kept", "next"}


# PostgreSQL only: SQLite numbers the rows as it inserts them, in the process, and draws nothing
@pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_numbers_drawn_ahead_are_drawn_a_block_at_a_time_and_never_given_twice(
    store: SqlStore, database_url: str
) -> None:
    # a second server process on the same database: its own engine, its own drawn numbers
    other = await open_store(database_url, secret_key="test-secret-key")
    assert isinstance(other, SqlStore)
    try:
        mine, theirs = json_services(Services(store)), json_services(Services(other))
        steps = [{"execCode": f"step = {i}"} for i in range(3)]
        with sent(store) as statements:
            made = [
                await services.scenarios.create({"name": f"s{i}", "steps": steps})
                for i in range(40)
                for services in (mine, theirs)
            ]
        # 40 creates of this engine: 40 fields and 120 step bodies, 1 and 2 blocks of DRAW_BLOCK numbers
        draws = [sql for sql, _ in statements if "nextval" in sql]
        assert len(draws) == 1 + 2 and DRAW_BLOCK == 100
        async with store.engine.connect() as conn:
            fields = (await conn.execute(sa.select(t.revision_fields.c.seq))).scalars().all()
            bodies = (await conn.execute(sa.select(t.revision_steps.c.seq))).scalars().all()
        assert len(fields) == len(set(fields)) == 80 and len(bodies) == len(set(bodies)) == 240
        for scenario in made[:2]:  # each revision reads back its own fields and bodies
            revision = await mine.revisions.get(scenario.id, 1)
            assert revision.content.name == scenario.name
            assert [step.exec_code for step in revision.content.steps] == ["step = 0", "step = 1", "step = 2"]
        # interleaved with the other's, an engine goes on taking its own block's numbers
        edited = await theirs.scenarios.update(made[1].id, {"steps": [{"execCode": "step = 9"}]})
        assert [step.exec_code for step in edited.steps] == ["step = 9"]
    finally:
        await other.close()


def step_writes(statements: list[tuple[str, Any]]) -> list[str]:
    """The writes to ``steps`` and ``scenario_credentials`` among ``statements``: their first words."""
    found = []
    for sql, _ in statements:
        match = re.match(r"(INSERT INTO|UPDATE|DELETE FROM) (steps|scenario_credentials)\b", sql)
        if match:
            found.append(f"{match[1].split()[0]} {match[2]}")
    return found


async def test_editing_a_step_writes_that_step_alone(services: Any, store: SqlStore) -> None:
    steps = [{"execCode": f"step = {n}"} for n in range(1, 6)]
    created = await services.scenarios.create({"name": "five steps", "steps": steps})
    third = created.steps[2]
    with sent(store) as statements:
        await services.scenarios.update_step(created.id, third.id, {"execCode": "step = 'three'"})
    # one UPDATE of one row; none of the other four deleted and inserted again (on PostgreSQL each
    # such rewrite left dead rows behind in the table and its index, and reads slowed with every edit)
    assert step_writes(statements) == ["UPDATE steps"], statements
    read = await services.scenarios.get(created.id)
    codes = ["step = 1", "step = 2", "step = 'three'", "step = 4", "step = 5"]
    assert [step.exec_code for step in read.steps] == codes
    assert [step.id for step in read.steps] == [step.id for step in created.steps]


async def test_a_scenario_saved_unchanged_writes_no_step(services: Any, store: SqlStore) -> None:
    created = await services.scenarios.create({"name": "s", "steps": [{"execCode": "a = 1"}]})
    with sent(store) as statements:
        await services.scenarios.update(created.id, {"description": "only the description"})
    assert step_writes(statements) == [], statements


async def test_steps_added_deleted_and_moved_and_links_changed_are_stored_as_they_are_now(
    services: Any, store: SqlStore
) -> None:
    first = await services.credentials.create({"name": "first", "secret": "one"})
    second = await services.credentials.create({"name": "second", "secret": "two"})
    body = {
        "name": "s",
        "steps": [{"execCode": "a = 1"}, {"execCode": "b = 2"}, {"execCode": "c = 3"}],
        "credentials": [{"credentialId": str(first.id), "alias": "first"}],
    }
    created = await services.scenarios.create(body)
    a, b, c = created.steps
    added = await services.scenarios.add_step(created.id, {"execCode": "d = 4", "order": 1})
    await services.scenarios.delete_step(created.id, b.id)
    await services.scenarios.reorder_steps(created.id, {"stepIds": [str(c.id), str(added.id), str(a.id)]})
    links = [
        {"credentialId": str(second.id), "alias": "second"},
        {"credentialId": str(first.id), "alias": "again"},
    ]
    await services.scenarios.update(created.id, {"credentials": links})
    read = await services.scenarios.get(created.id)
    assert [(step.id, step.order, step.exec_code) for step in read.steps] == [
        (c.id, 1, "c = 3"),
        (added.id, 2, "d = 4"),
        (a.id, 3, "a = 1"),
    ]
    assert [(link.credential_id, link.alias) for link in read.credentials] == [
        (second.id, "second"),
        (first.id, "again"),
    ]
    with sent(store) as statements:  # the same links again: not written
        await services.scenarios.update(created.id, {"name": "renamed", "credentials": links})
    assert step_writes(statements) == [], statements

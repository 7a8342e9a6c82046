"""Scenario revisions on SQLite and PostgreSQL: one per change, none for a write that changes nothing,
numbered under the scenario's lock, step bodies stored once, restored as new, deleted with the scenario."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import sqlalchemy as sa
from alembic import command

from scenariokit.domain.errors import NotFound
from scenariokit.domain.revisions import Origin, RevisionSource, content_hash, content_of
from scenariokit.formats.queries import RevisionQuery
from scenariokit.storage.migrations import alembic_config
from scenariokit.storage.sqlalchemy import SqlStore
from scenariokit.storage.sqlalchemy import tables as t


async def _count(store: SqlStore, table: sa.Table, scenario_id: uuid.UUID) -> int:
    async with store.engine.connect() as conn:
        stmt = sa.select(sa.func.count()).select_from(table).where(table.c.scenario_id == scenario_id)
        return int((await conn.execute(stmt)).scalar_one())


async def test_every_change_makes_one_revision_and_an_unchanged_write_none(services: Any) -> None:
    scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "a = 1"}]})
    assert scenario.revision == 1
    step_id = scenario.steps[0].id
    changed = await services.scenarios.update(scenario.id, {"name": "checkout v2"})
    assert changed.revision == 2
    same = await services.scenarios.update(scenario.id, {"name": "checkout v2"})
    assert same.revision == 2 and same.updated_at == changed.updated_at
    await services.scenarios.update_step(scenario.id, step_id, {"execCode": "a = 1"})  # the same code
    step = await services.scenarios.add_step(scenario.id, {"execCode": "b = 2"})
    await services.scenarios.update_step(scenario.id, step_id, {"execCode": "a = 3"})
    await services.scenarios.reorder_steps(scenario.id, {"stepIds": [str(step.id), str(step_id)]})
    await services.scenarios.delete_step(scenario.id, step.id)
    current = await services.scenarios.get(scenario.id)
    assert current.revision == 6

    page = await services.revisions.list(scenario.id)
    assert page.total == 6
    assert [info.number for info in page.items] == [6, 5, 4, 3, 2, 1]
    assert {info.source for info in page.items} == {RevisionSource.LIBRARY}
    assert page.items[0].content_hash == content_hash(content_of(current))
    first = await services.revisions.get(scenario.id, 1)
    assert first.content.name == "checkout"
    assert [(s.id, s.exec_code) for s in first.content.steps] == [(step_id, "a = 1")]
    fifth = await services.revisions.get(scenario.id, 5)
    assert [s.exec_code for s in fifth.content.steps] == ["b = 2", "a = 3"]
    assert [s.order for s in fifth.content.steps] == [1, 2]
    oldest_first = await services.revisions.list(scenario.id, RevisionQuery(order_dir="asc", limit=2))
    assert [info.number for info in oldest_first.items] == [1, 2] and oldest_first.total == 6


async def test_the_origin_is_kept_with_the_revision(services: Any) -> None:
    scenario = await services.scenarios.create({"name": "checkout"})
    origin = Origin(source=RevisionSource.MCP, token_name="ci-bot", message="name it for the release")
    await services.scenarios.update(scenario.id, {"name": "checkout 2"}, origin=origin)
    info = (await services.revisions.list(scenario.id)).items[0]
    assert (info.number, info.source, info.token_name, info.message) == (
        2,
        RevisionSource.MCP,
        "ci-bot",
        "name it for the release",
    )


async def test_two_concurrent_patches_make_two_revisions_and_lose_no_update(services: Any) -> None:
    scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "first"}]})
    for round_ in range(4):
        await asyncio.gather(
            services.scenarios.update(scenario.id, {"description": f"described {round_}"}),
            services.scenarios.update(scenario.id, {"timeoutSeconds": 100 + round_}),
        )
    stored = await services.scenarios.get(scenario.id)
    assert stored.revision == 9
    assert (stored.description, stored.timeout_seconds) == ("described 3", 103.0)
    page = await services.revisions.list(scenario.id, RevisionQuery(limit=20))
    assert sorted(info.number for info in page.items) == list(range(1, 10))
    newest = await services.revisions.get(scenario.id, 9)
    assert (newest.content.description, newest.content.timeout_seconds) == ("described 3", 103.0)


async def test_unchanged_step_bodies_are_stored_once(services: Any, store: SqlStore) -> None:
    scenario = await services.scenarios.create(
        {"name": "long", "steps": [{"execCode": f"step_{i} = {i}"} for i in range(20)]}
    )
    for edit in range(30):
        step = scenario.steps[edit % 20]
        await services.scenarios.update_step(scenario.id, step.id, {"execCode": f"edited = {edit}"})
    assert await _count(store, t.scenario_revisions, scenario.id) == 31
    assert await _count(store, t.revision_steps, scenario.id) == 20 + 30
    assert await _count(store, t.revision_fields, scenario.id) == 1  # the fields never changed
    last = await services.revisions.get(scenario.id, 31)
    assert [s.exec_code for s in last.content.steps] == [
        f"edited = {i + 20}" if i < 10 else f"edited = {i}" for i in range(20)
    ]


async def test_restore_makes_a_new_revision_equal_to_the_old_one(services: Any) -> None:
    scenario = await services.scenarios.create(
        {"name": "checkout", "steps": [{"execCode": "one"}, {"execCode": "two"}]}
    )
    await services.scenarios.update(scenario.id, {"name": "renamed", "steps": [{"execCode": "other"}]})
    restored = await services.revisions.restore(scenario.id, 1, origin=Origin(message="back to one"))
    assert restored.revision == 3
    assert [(s.id, s.exec_code) for s in restored.steps] == [(s.id, s.exec_code) for s in scenario.steps]
    assert restored.name == "checkout"
    page = await services.revisions.list(scenario.id)
    assert [(i.number, i.source, i.message) for i in page.items] == [
        (3, RevisionSource.RESTORE, "back to one"),
        (2, RevisionSource.LIBRARY, None),
        (1, RevisionSource.LIBRARY, None),
    ]
    assert page.items[0].content_hash == page.items[2].content_hash  # equal content, history kept
    second = await services.revisions.get(scenario.id, 2)
    assert second.content.name == "renamed"
    again = await services.revisions.restore(scenario.id, 3)
    assert again.revision == 3  # restoring what it holds changes nothing
    diff = await services.revisions.diff(scenario.id, 1, 3)
    assert diff.unchanged


async def test_unknown_revisions_and_scenarios_are_not_found(services: Any) -> None:
    scenario = await services.scenarios.create({"name": "checkout"})
    for call in (
        services.revisions.get(scenario.id, 2),
        services.revisions.diff(scenario.id, 1, 5),
        services.revisions.restore(scenario.id, 7),
        services.revisions.get(uuid.uuid4(), 1),
        services.revisions.list(uuid.uuid4()),
        services.revisions.restore(uuid.uuid4(), 1),
    ):
        try:
            await call
        except NotFound:
            continue
        raise AssertionError("expected NotFound")


async def test_deleting_a_scenario_deletes_its_revisions(services: Any, store: SqlStore) -> None:
    scenario = await services.scenarios.create({"name": "gone", "steps": [{"execCode": "x = 1"}]})
    await services.scenarios.update_step(scenario.id, scenario.steps[0].id, {"execCode": "x = 2"})
    assert await _count(store, t.scenario_revisions, scenario.id) == 2
    await services.scenarios.delete(scenario.id)
    assert await _count(store, t.scenario_revisions, scenario.id) == 0
    assert await _count(store, t.revision_steps, scenario.id) == 0
    assert await _count(store, t.revision_fields, scenario.id) == 0


def _downgrade(connection: sa.Connection) -> None:
    command.downgrade(alembic_config(connection), "0008_audit_log")


def _upgrade(connection: sa.Connection) -> None:
    command.upgrade(alembic_config(connection), "head")


async def test_the_migration_gives_stored_scenarios_revision_one(services: Any, store: SqlStore) -> None:
    environment = await services.environments.create({"name": "local", "data": {"url": "http://127.0.0.1:1"}})
    async with store.engine.begin() as conn:
        await conn.run_sync(_downgrade)
    scenario_id, step_ids = uuid.uuid4(), [uuid.uuid4(), uuid.uuid4()]
    queued, finished = uuid.uuid4(), uuid.uuid4()
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO scenarios (id, name, description, timeout_seconds, created_at, updated_at, "
                "retries) VALUES (:id, 'old', 'kept', 60, :at, :at, NULL)"
            ).bindparams(sa.bindparam("id", type_=sa.Uuid()), sa.bindparam("at", type_=t.UTCDateTime())),
            {"id": scenario_id, "at": environment.created_at},
        )
        for position, step_id in enumerate(step_ids, start=1):
            await conn.execute(
                sa.insert(t.steps).values(
                    id=step_id, scenario_id=scenario_id, position=position, exec_code=f"s = {position}"
                )
            )
        for run_id, status in ((queued, "in_progress"), (finished, "pass")):
            await conn.execute(
                sa.text(
                    "INSERT INTO runs (id, scenario_id, scenario_name, environment_id, save_session, status, "
                    "step_results, artifacts, created_at) VALUES (:id, :scenario, 'old', :env, false, "
                    ":status, '[]', '[]', :at)"
                ).bindparams(
                    sa.bindparam("id", type_=sa.Uuid()),
                    sa.bindparam("scenario", type_=sa.Uuid()),
                    sa.bindparam("env", type_=sa.Uuid()),
                    sa.bindparam("at", type_=t.UTCDateTime()),
                ),
                {
                    "id": run_id,
                    "scenario": scenario_id,
                    "env": environment.id,
                    "status": status,
                    "at": environment.created_at,
                },
            )
    async with store.engine.begin() as conn:
        await conn.run_sync(_upgrade)
    scenario = await services.scenarios.get(scenario_id)
    assert scenario.revision == 1
    first = await services.revisions.get(scenario_id, 1)
    assert first.info.content_hash == content_hash(content_of(scenario))
    assert [(s.id, s.order, s.exec_code) for s in first.content.steps] == [
        (step_ids[0], 1, "s = 1"),
        (step_ids[1], 2, "s = 2"),
    ]
    assert (await services.runs.get(queued)).run.scenario_revision == 1
    assert (await services.runs.get(finished)).run.scenario_revision is None
    changed = await services.scenarios.update(scenario_id, {"description": "changed"})
    assert changed.revision == 2


async def test_yaml_export_writes_the_revision_and_import_ignores_it(services: Any) -> None:
    scenario = await services.scenarios.create({"name": "checkout", "steps": [{"execCode": "a = 1"}]})
    await services.scenarios.update(scenario.id, {"description": "two"})
    text = await services.transfer.export_scenarios([scenario.id])
    assert "\nrevision: 2\n" in text
    await services.transfer.import_yaml(text, kind="scenario")
    assert (await services.scenarios.get(scenario.id)).revision == 2  # unchanged: no revision
    edited = text.replace("revision: 2", "revision: 99").replace("a = 1", "a = 2")
    await services.transfer.import_yaml(edited, kind="scenario")
    stored = await services.scenarios.get(scenario.id)
    assert stored.revision == 3 and stored.steps[0].exec_code == "a = 2"
    info = (await services.revisions.list(scenario.id)).items[0]
    assert (info.number, info.source) == (3, RevisionSource.IMPORT)
    created = await services.transfer.import_yaml(
        "kind: scenario\nname: fresh\nrevision: 7\nsteps: []\n", kind="scenario"
    )
    [fresh_id] = created.created["scenario"]
    assert (await services.scenarios.get(fresh_id)).revision == 1
    assert (await services.revisions.get(fresh_id, 1)).info.source is RevisionSource.IMPORT
